#pragma once
// What a pipeline report's print(FILE*) writes, as a string (the tests of pipeline/*.h).
#include <cstdio>
#include <cstdlib>
#include <string>

template <class Report>
std::string printed(const Report& report) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  report.print(f);
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  return text;
}
