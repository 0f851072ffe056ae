// The proof driver: one Z3 context per rule, the axioms and the rule's assumptions, then one
// check per output mapping: "source != target" must be unsatisfiable. Model-based quantifier instantiation is off, so an
// unprovable goal ends in "unknown" as soon as E-matching saturates instead of running to the
// timeout.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <set>

#include "prover_internal.h"
#include "rlflow/rules/prover.h"

namespace rlflow::rules {

ProofResult prove_rule(const Rule& r, const ProofOptions& opts) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  ProofResult res;
  res.rule = r.name;
  try {
    z3::context c;
    prover::Signature sig(c);
    z3::expr_vector base = prover::axioms(sig);
    auto q = prover::translate(sig, r);
    res.notes = q.notes;
    for (const auto& [what, f] : q.assumptions) base.push_back(f);
    std::unique_ptr<std::ofstream> dump;
    if (!opts.dump_smt2.empty()) {
      z3::solver s(c);
      s.add(base);
      dump = std::make_unique<std::ofstream>(opts.dump_smt2 + "/" + r.name + ".smt2");
      std::string text = s.to_smt2();
      text.erase(text.rfind("(check-sat)"));  // each goal gets its own below
      *dump << "; rule " << r.name << "\n" << text;
    }
    if (q.goals.empty()) res.message = "the rule maps no outputs";
    std::vector<std::string> lifted;  // goals proved by elementwise lifting, not the axioms
    std::set<std::string> positive;   // tensor variables whose elements are all > 0
    for (const auto& [name, spec] : r.vars)
      if (spec.positive) positive.insert(name);
    bool all = !q.goals.empty();
    for (const auto& g : q.goals) {
      const double left = opts.timeout_s - elapsed();
      if (left <= 0) {
        res.outcome = ProofOutcome::kTimeout;
        res.message = "output " + g.name + ": no time left";
        all = false;
        break;
      }
      std::string counterexample;
      const auto lift = prover::prove_elementwise(c, g.source, g.target, std::min(left, 1.0), positive, &counterexample);
      if (lift == prover::LiftOutcome::kProved) {
        lifted.push_back(g.name);
        continue;
      }
      if (lift == prover::LiftOutcome::kCounterexample) {
        res.outcome = ProofOutcome::kDisproved;
        res.message = "output " + g.name + " is false: over the reals the two sides differ at " + counterexample;
        all = false;
        break;
      }
      if (dump) *dump << "; goal " << g.name << "\n(push)\n(assert (not (= " << g.source << " " << g.target << ")))\n(check-sat)\n(pop)\n" << std::flush;
      // A fresh solver per goal, without push/pop: Z3's incremental mode instantiates
      // quantifiers eagerly while internalising and can loop there without noticing the timeout.
      z3::solver s(c);
      z3::params p(c);
      p.set("mbqi", false);
      p.set("random_seed", 0u);
      p.set("timeout", static_cast<unsigned>(std::max(1.0, left * 1000.0)));
      s.set(p);
      s.add(base);
      s.add(g.source != g.target);
      const auto verdict = s.check();
      if (verdict == z3::unsat) continue;
      all = false;
      const std::string why = s.reason_unknown();
      const bool timed_out = verdict == z3::unknown &&
                             (why.find("timeout") != std::string::npos || why.find("canceled") != std::string::npos || elapsed() >= opts.timeout_s);
      res.outcome = timed_out ? ProofOutcome::kTimeout : ProofOutcome::kNotProved;
      res.message = "output " + g.name + ": " +
                    (timed_out ? std::string("timed out")
                     : verdict == z3::sat ? std::string("the solver found a model of the axioms where they differ")
                                          : "the solver gave up (" + why + ")");
      break;
    }
    if (all) {
      res.outcome = ProofOutcome::kProved;
      if (!lifted.empty()) {
        res.message = "by elementwise real arithmetic:";
        for (const auto& n : lifted) res.message += " " + n;
      }
    }
  } catch (const z3::exception& e) {
    res.outcome = ProofOutcome::kError;
    res.message = std::string("solver error: ") + e.msg();
  }
  res.seconds = elapsed();
  return res;
}

namespace {

// The child's result through the pipe: outcome, seconds, then length-prefixed strings.
void put_string(std::string& out, const std::string& v) {
  out += std::to_string(v.size()) + ":" + v;
}

bool get_string(const std::string& in, size_t& at, std::string* v) {
  const size_t colon = in.find(':', at);
  if (colon == std::string::npos) return false;
  size_t n = 0;
  for (size_t i = at; i < colon; ++i) {
    if (in[i] < '0' || in[i] > '9') return false;
    n = n * 10 + static_cast<size_t>(in[i] - '0');
  }
  if (colon + 1 + n > in.size()) return false;
  *v = in.substr(colon + 1, n);
  at = colon + 1 + n;
  return true;
}

std::string encode(const ProofResult& r) {
  std::string out;
  put_string(out, std::to_string(static_cast<int>(r.outcome)));
  put_string(out, std::to_string(r.seconds));
  put_string(out, r.message);
  put_string(out, std::to_string(r.notes.size()));
  for (const auto& n : r.notes) put_string(out, n);
  return out;
}

bool decode(const std::string& in, ProofResult* r) {
  size_t at = 0;
  std::string outcome, seconds, count;
  if (!get_string(in, at, &outcome) || !get_string(in, at, &seconds) || !get_string(in, at, &r->message) ||
      !get_string(in, at, &count))
    return false;
  const int o = std::atoi(outcome.c_str());
  if (o < 0 || o > static_cast<int>(ProofOutcome::kDisproved)) return false;
  r->outcome = static_cast<ProofOutcome>(o);
  r->seconds = std::atof(seconds.c_str());
  const int n = std::atoi(count.c_str());
  for (int i = 0; i < n; ++i) {
    std::string note;
    if (!get_string(in, at, &note)) return false;
    r->notes.push_back(std::move(note));
  }
  return at == in.size();
}

}  // namespace

ProofResult prove_rule_isolated(const Rule& r, const ProofOptions& opts, double grace_s) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  ProofResult res;
  res.rule = r.name;
  int fds[2];
  if (::pipe(fds) != 0) {
    res.outcome = ProofOutcome::kError;
    res.message = "cannot create a pipe for the prover process";
    return res;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    res.outcome = ProofOutcome::kError;
    res.message = "cannot start the prover process";
    return res;
  }
  if (pid == 0) {  // child: prove, write, leave without running the parent's exit handlers
    // Close what the child inherited, above all other workers' pipes: a child holding another
    // worker's write end would keep that worker from seeing its own child's end.
    if (fds[1] > 3) ::close_range(3, static_cast<unsigned>(fds[1]) - 1, 0);
    ::close_range(static_cast<unsigned>(fds[1]) + 1, ~0u, 0);
    std::string out = encode(prove_rule(r, opts));
    out = std::to_string(out.size()) + "\n" + out;  // framed: the parent knows when it has all of it
    size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t w = ::write(fds[1], out.data() + sent, out.size() - sent);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ::_exit(1);
      sent += static_cast<size_t>(w);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  bool killed = false;
  char buf[4096];
  for (;;) {
    const double left = opts.timeout_s + grace_s - elapsed();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed the pipe: done (or dead)
    got.append(buf, static_cast<size_t>(n));
    const size_t nl = got.find('\n');
    if (nl != std::string::npos && got.size() - nl - 1 >= static_cast<size_t>(std::atoll(got.substr(0, nl).c_str()))) break;
  }
  if (const size_t nl = got.find('\n'); nl != std::string::npos) got.erase(0, nl + 1);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (killed) {
    res.outcome = ProofOutcome::kTimeout;
    res.message = "timed out (the solver did not stop at its timeout; its process was stopped)";
  } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) || !decode(got, &res)) {
    res.outcome = ProofOutcome::kError;
    res.message = WIFSIGNALED(status) ? "the prover process died (signal " + std::to_string(WTERMSIG(status)) + ")"
                                      : std::string("the prover process returned no result");
  }
  res.rule = r.name;
  res.seconds = elapsed();
  return res;
}

}  // namespace rlflow::rules
