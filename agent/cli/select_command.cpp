// `seqpoint select --trace T [--budget N | --target-error P] [--online] [--json]`
// Chooses SeqPoints from the SL-side columns of a trace; metric columns are not read.
#include <cstdio>

#include "agent/cli/commands.h"
#include "agent/cli/select_options.h"
#include "selector/selection_json.h"

namespace seqpoint::cli {
namespace {

void PrintTable(std::FILE* out, const selector::Selection& s) {
  std::fprintf(out, "%llu iterations, %zu SeqPoints, %llu iterations to measure (1/%.0f of the run); "
              "method %s; cost-model error %.3f%%\n",
              static_cast<unsigned long long>(s.iterations), s.points.size(),
              static_cast<unsigned long long>(s.measured()),
              s.measured() ? static_cast<double>(s.iterations) / s.measured() : 0.0, s.method.c_str(),
              s.proxy_error_pct);
  std::fprintf(out, "%-16s %10s %8s %10s  %s\n", "bin (seq_len)", "weight", "seq_len", "iter", "iters");
  for (const auto& p : s.points) {
    char bin[40];
    std::snprintf(bin, sizeof bin, "%u-%u", p.bin_lo, p.bin_hi);
    std::string iters;
    for (size_t i = 0; i < p.iters.size() && i < 8; ++i) iters += (i ? "," : "") + std::to_string(p.iters[i]);
    if (p.iters.size() > 8) iters += ",... (" + std::to_string(p.iters.size()) + ")";
    std::fprintf(out, "%-16s %10llu %8u %10llu  %s\n", bin, static_cast<unsigned long long>(p.weight), p.seq_len,
                static_cast<unsigned long long>(p.iter), iters.c_str());
  }
}

}  // namespace

int RunSelectCommand(Args argv) {
  auto specs = SelectOptionSpecs(/*fraction_offline=*/false);
  specs.insert(specs.begin(),
               {{"--trace", true,
                 "the iteration trace (CSV, docs/trace-csv.md; - reads stdin, with --online)",
                 "FILE"},
                {"--json", false, "print the selection as JSON (for 'project')"},
                {"--out", true, "write the output to FILE instead of stdout", "FILE"},
                {"--progress", false, "report rows read on stderr"}});
  auto args = ParseArgs(argv, specs);
  if (!args.ok()) {
    std::fprintf(stderr, "seqpoint select: %s\n", args.status().message().c_str());
    return 2;
  }
  if (args->Has("--help")) {
    PrintHelp("select --trace FILE [--budget N | --target-error P] [--online [--budget-fraction F]] "
              "[--json]",
              "Chooses SeqPoints (representative iterations) from a trace's seq_len/batch columns.",
              specs);
    return 0;
  }
  auto trace = args->Get("--trace");
  if (!trace) {
    std::fprintf(stderr, "seqpoint select: --trace FILE is required (see --help)\n");
    return 2;
  }
  if (args->Has("--budget-fraction") && !args->Has("--online")) {
    std::fprintf(stderr, "seqpoint select: --budget-fraction is for --online; use --budget N\n");
    return 2;
  }
  auto req = SelectRequestFromArgs(*args, *trace, 0);
  if (!req.ok()) {
    std::fprintf(stderr, "seqpoint select: %s\n", req.status().message().c_str());
    return 2;
  }
  req->progress = args->Has("--progress");
  uint32_t bins_needed = 0;
  auto sel = SelectFromTraceFile(*req, &bins_needed);
  if (!sel.ok()) {
    std::fprintf(stderr, "seqpoint select: %s\n", sel.status().message().c_str());
    return 1;
  }
  if (std::string w = BudgetWarning(*req, *sel, bins_needed); !w.empty()) {
    std::fprintf(stderr, "seqpoint select: %s\n", w.c_str());
  }
  std::FILE* out = stdout;
  if (auto path = args->Get("--out")) {
    out = std::fopen(path->c_str(), "w");
    if (!out) {
      std::fprintf(stderr, "seqpoint select: cannot write '%s'\n", path->c_str());
      return 1;
    }
  }
  if (args->Has("--json")) {
    std::fprintf(out, "%s\n", selector::SelectionToJson(*sel, 2).c_str());
  } else {
    PrintTable(out, *sel);
  }
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace seqpoint::cli
