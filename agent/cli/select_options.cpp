#include "agent/cli/select_options.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace seqpoint::cli {

std::vector<OptionSpec> SelectOptionSpecs(bool fraction_offline) {
  return {
      {"--budget", true, "at most N iterations measured in all (not with --target-error)", "N"},
      {"--budget-fraction", true,
       fraction_offline
           ? "at most this fraction of the iterations measured (e.g. 0.005); offline it becomes "
             "--budget floor(F x iterations), at least 1 (the smaller, with --budget)"
           : "with --online: at most this fraction of the iterations so far measured (e.g. "
             "0.005); offline, use --budget N",
       "F"},
      {"--target-error", true,
       "cost-model error to meet, percent (default 0.5); without a budget, measure the fewest "
       "iterations that meet it (not with --budget)",
       "P"},
      {"--online", false, "decide row by row with no look-ahead, as the daemon does"},
      {"--per-doubling", true,
       "with --online: measurements per doubling of the run (default 16, or budget/8 with "
       "--budget; 0: none, the caps alone)",
       "N"},
      {"--repeats", true, "samples per point when no budget is given (default 3)", "N"},
      {"--warmup", true,
       "first N iterations never measured (default 10 offline, 0 online: online, the warm-up is "
       "found from the iterations' times and projected as its own stratum)",
       "N"},
      {"--counter-groups", true, "rotate N counter groups across a point's samples (default 1)",
       "N"},
      {"--max-bins", true, "at most N SeqPoints (default 4096 offline, 256 online)", "N"},
  };
}

Result<SelectRequest> SelectRequestFromArgs(const ParsedArgs& args, const std::string& trace,
                                            uint64_t iterations) {
  SelectRequest req;
  req.trace = trace;
  req.online = args.Has("--online");
  auto budget = args.GetInt("--budget");
  auto fraction = args.GetDouble("--budget-fraction");
  auto target = args.GetDouble("--target-error");
  auto repeats = args.GetInt("--repeats");
  auto warmup = args.GetInt("--warmup");
  auto groups = args.GetInt("--counter-groups");
  auto max_bins = args.GetInt("--max-bins");
  auto per_doubling = args.GetInt("--per-doubling");
  for (const Status* st : {&budget.status(), &fraction.status(), &target.status(), &repeats.status(),
                           &warmup.status(), &groups.status(), &max_bins.status(),
                           &per_doubling.status()}) {
    if (!st->ok()) return *st;
  }
  if (*budget && **budget < 1) return InvalidArgument("--budget must be at least 1");
  if (*fraction && !(**fraction > 0 && **fraction <= 1)) {
    return InvalidArgument("--budget-fraction must be in (0, 1], e.g. 0.005 for 1/200");
  }
  if (*target && !(**target > 0)) return InvalidArgument("--target-error must be a positive percent");
  if (*repeats && **repeats < 1) return InvalidArgument("--repeats must be at least 1");
  if (*warmup && **warmup < 0) return InvalidArgument("--warmup must be >= 0");
  if (*groups && (**groups < 1 || **groups > 64)) return InvalidArgument("--counter-groups must be 1..64");
  if (*max_bins && **max_bins < 1) return InvalidArgument("--max-bins must be at least 1");
  if (*per_doubling && (**per_doubling < 0 || **per_doubling > 1000000)) {
    return InvalidArgument("--per-doubling must be 0..1000000, got " + std::to_string(**per_doubling));
  }
  if (*per_doubling && !req.online) return InvalidArgument("--per-doubling needs --online");
  if (*target && (*budget || *fraction)) {
    return InvalidArgument(std::string(*budget ? "--budget" : "--budget-fraction") +
                           " and --target-error are alternatives: give a budget to cap the "
                           "iterations measured, or --target-error P to measure the fewest that "
                           "meet P% on the cost model, not both");
  }

  auto& off = req.offline;
  auto& on = req.online_options;
  if (*target) off.target_error_pct = on.target_error_pct = **target;
  on.warmup = 0;
  if (*warmup) off.warmup = on.warmup = static_cast<uint64_t>(**warmup);
  if (*groups) off.counter_groups = on.counter_groups = static_cast<uint32_t>(**groups);
  if (*max_bins) off.max_bins = on.max_bins = static_cast<uint32_t>(**max_bins);
  if (*repeats) off.repeats = static_cast<uint32_t>(**repeats);
  if (req.online) {
    if (*budget) on.budget_count = static_cast<uint64_t>(**budget);
    if (*fraction) on.budget_fraction = **fraction;
    // The run's length is unknown online: by default the budget lasts, k per doubling of the
    // run; a count budget alone is stretched over about eight doublings.
    on.per_doubling = *budget ? static_cast<uint32_t>(std::max<int64_t>(2, (**budget + 7) / 8)) : 16;
    if (*per_doubling) on.per_doubling = static_cast<uint32_t>(**per_doubling);
    if (on.per_doubling == 0 && !*budget && !*fraction) on.budget_fraction = 1.0 / 200;
  } else {
    if (*budget) off.budget = static_cast<uint64_t>(**budget);
    if (*fraction) {
      if (iterations == 0) {
        return InvalidArgument("--budget-fraction needs the run length; use --budget N offline");
      }
      uint64_t f = static_cast<uint64_t>(std::floor(**fraction * static_cast<double>(iterations)));
      off.budget = off.budget ? std::min(off.budget, std::max<uint64_t>(f, 1)) : std::max<uint64_t>(f, 1);
    }
  }
  return req;
}

}  // namespace seqpoint::cli
