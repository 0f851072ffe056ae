// The proof driver: one Z3 context per rule, the axioms and the rule's assumptions, then one
// check per output mapping: "source != target" must be unsatisfiable. Model-based quantifier instantiation is off, so an
// unprovable goal ends in "unknown" as soon as E-matching saturates instead of running to the
// timeout.
#include <chrono>
#include <fstream>
#include <memory>

#include "prover_internal.h"
#include "rlflow/rules/prover.h"

namespace rlflow::rules {

std::string_view outcome_name(ProofOutcome o) {
  switch (o) {
    case ProofOutcome::kProved: return "proved";
    case ProofOutcome::kNotProved: return "not proved";
    case ProofOutcome::kTimeout: return "timeout";
    case ProofOutcome::kError: return "error";
  }
  return "?";
}

VerifyStatus combined_status(bool numeric_ok, const ProofResult* proof) {
  if (!numeric_ok) return VerifyStatus::kRefuted;
  return proof && proof->proved() ? VerifyStatus::kProved : VerifyStatus::kNumeric;
}

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
    bool all = !q.goals.empty();
    for (const auto& g : q.goals) {
      const double left = opts.timeout_s - elapsed();
      if (left <= 0) {
        res.outcome = ProofOutcome::kTimeout;
        res.message = "output " + g.name + ": no time left";
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
    if (all) res.outcome = ProofOutcome::kProved;
  } catch (const z3::exception& e) {
    res.outcome = ProofOutcome::kError;
    res.message = std::string("solver error: ") + e.msg();
  }
  res.seconds = elapsed();
  return res;
}

}  // namespace rlflow::rules
