// rlflow._rlflow: the native half of the Python package (src/python/rlflow). It runs the optimise
// pipeline from the library (options parsed exactly as the command line parses them), the other
// commands in this process as their --json form, and renders the HTML report. The Python half
// turns exit codes into typed exceptions and JSON into Result and Report objects.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <Python.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#ifdef RLFLOW_HAVE_CUDNN
#include "cost/cuda/gpu_api.h"
#endif
#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cli/app.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/pipeline/report_html.h"
#include "rlflow/rl/module.h"
#include "rlflow/rules/tools_module.h"
#include "rlflow/util/file_io.h"

namespace py = pybind11;
using namespace rlflow;

namespace {

// (exit code, JSON document, error message): exit code 0 carries the report, any other the message.
// `line`: the CLI's progress line on stderr where it belongs (a terminal, not -q); `progress`: a
// Python function called with the search's progress instead (or None).
py::tuple optimise(const std::vector<std::string>& args, py::object progress, bool line) {
  auto opts = cli::parse_optimise_args(args);
  if (!opts) return py::make_tuple(static_cast<int>(cli::kUsage), std::string(), opts.error().message);
  cli::OptimiseProgress drawn(*opts, line && progress.is_none() && cli::progress_wanted(false));
  pipeline::OptimiseHooks hooks = drawn.hooks();
  // The search calls back now and then: Ctrl-C (a pending KeyboardInterrupt) and the caller's
  // progress function run there, with the interpreter's lock held only for that moment. An
  // exception they raise unwinds the pipeline (its temporary files go with it) and reaches Python.
  // The hook is copied inside the pipeline without the lock: it holds a borrowed pointer (the
  // argument outlives the call), never a reference it would have to count.
  PyObject* callback = progress.is_none() ? nullptr : progress.ptr();
  hooks.progress = [callback, draw = hooks.progress](const search::Report& r, double best) {
    if (draw) draw(r, best);
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (callback) {
      py::handle fn(callback);
      fn(r.expanded, r.unique_graphs, best, r.seconds_total);
    }
  };
  Expected<pipeline::OptimiseReport> report = Error::internal("not run");
  {
    py::gil_scoped_release release;
    try {
      report = pipeline::optimise(*opts, hooks);
    } catch (const py::error_already_set&) {
      throw;
    } catch (const std::bad_alloc&) {
      report = Error::internal("out of memory");
    } catch (const std::exception& e) {
      report = Error::internal(std::string("unexpected failure: ") + e.what());
    }
  }
  drawn.finish();
  if (!report) return py::make_tuple(cli::exit_code_for(report.error().code), std::string(), report.error().message);
  return py::make_tuple(static_cast<int>(cli::kOk), cli::json_text(report->to_json()), std::string());
}

// (exit code, JSON document, usage message) of `rlflow ARGS --json`, run in this process.
py::tuple run_json(const std::vector<std::string>& args) {
  cli::JsonRun r;
  {
    py::gil_scoped_release release;
    r = cli::run_json(args);
  }
  return py::make_tuple(r.exit_code, r.json, r.usage);
}

std::string report_html(const std::string& json_text) {
  return pipeline::report_html(nlohmann::json::parse(json_text));
}

}  // namespace

PYBIND11_MODULE(_rlflow, m) {
  m.doc() = "rlflow's native module: use the rlflow package's functions instead";
  // Linked in: no module files to find beside a binary.
  pipeline::use_rl_module(&rl::module());
  rules::use_tools_module(&rules::tools_table());
#ifdef RLFLOW_HAVE_CUDNN
  cost::use_cudnn_module(&cost::gpu::cudnn_module_table());
#endif
  m.def("optimise", &optimise, py::arg("args"), py::arg("progress") = py::none(), py::arg("line") = false);
  m.def("run_json", &run_json, py::arg("args"));
  m.def("report_html", &report_html, py::arg("report_json"));
  m.def("set_shipped_root", &set_shipped_root, py::arg("folder"));
  m.def("version", &cli::version_string);
}
