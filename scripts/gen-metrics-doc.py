#!/usr/bin/env python3
"""Writes docs/metrics.md from tests/golden/metrics.txt (the shape of seqpointd's /metrics) and
tests/golden/straggler_metrics.txt (the straggler families of a data-parallel run, which the
replayed run of metrics.txt does not have; agent_fleet_straggler_metrics_test keeps it).

The golden file is what a replayed run exports; this turns it into the table operators read.
ctest (docs_metrics_documented) fails when the two disagree.
Usage: scripts/gen-metrics-doc.py [--check]
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "metrics.txt")
GOLDEN_STRAGGLERS = os.path.join(ROOT, "tests", "golden", "straggler_metrics.txt")
DOC = os.path.join(ROOT, "docs", "metrics.md")

# The families seqpointd also pushes by remote-write (RunFamilies(..., for_upload=true)).
UPLOADED = {
    "seqpoint_run_info", "seqpoint_run_projection", "seqpoint_run_projection_low",
    "seqpoint_run_projection_high", "seqpoint_run_actual", "seqpoint_run_self_check_error_ratio",
    "seqpoint_run_self_check_within_interval", "seqpoint_run_iterations_total",
    "seqpoint_run_measured_iterations_total", "seqpoint_run_observer_effect_ratio",
    "seqpoint_run_observer_effect_ratio_low", "seqpoint_run_observer_effect_ratio_high",
    "seqpoint_run_observer_effect_flagged", "seqpoint_run_projection_perturbed",
    "seqpoint_run_projection_left_out",
    "seqpoint_run_projection_steady_state", "seqpoint_run_projection_bounded",
    "seqpoint_run_projection_unobserved", "seqpoint_run_unobserved_iterations_total",
    # Gauges as gauges: time-weighted means and peaks (selector/estimate/whole_run_estimator.h).
    "seqpoint_run_gauge_mean", "seqpoint_run_gauge_mean_low", "seqpoint_run_gauge_mean_high",
    "seqpoint_run_gauge_peak",
    # The fleet view's per-bin cost (agent/fleet/fleet_efficiency.h).
    "seqpoint_fleet_bin_iterations_total", "seqpoint_fleet_bin_work_total",
    "seqpoint_fleet_bin_time_seconds_total", "seqpoint_fleet_bin_energy_joules_total",
    "seqpoint_fleet_bin_energy_work_total",
    # Straggling ranks and the slow-rank test (agent/fleet/straggler_metrics.h).
    "seqpoint_run_collective_steps_total", "seqpoint_run_straggler_steps_total",
    "seqpoint_run_straggler_lag_seconds_total", "seqpoint_run_rank_last_arrival_steps_total",
    "seqpoint_run_rank_slower_than_peers", "seqpoint_run_rank_compute_ratio",
    "seqpoint_run_rank_detectable_slowdown", "seqpoint_run_detectable_slowdown",
}

HEADER = """# Metrics

`seqpointd` serves these families on `/metrics` (default `127.0.0.1:9464`, `metrics.listen`),
in the Prometheus text format; values are in base units (seconds, joules, bytes). The families
marked *uploaded* are also pushed by Prometheus remote-write when `upload.url` is set, each series
with the labels of `[upload.labels]` added (a label the series has already wins).

Rules dashboards and alerts may rely on: a name, its labels and its type change only with a
diff of this file and of `tests/golden/metrics.txt` (the golden test `agent_golden_test` fails
otherwise). `run` is the daemon's run id, `key` the run key (`runs.group_by`), `metric`/`unit`
name a projected metric in base units.

## Cardinality

Rules, enforced in code (`agent/runs/series_cap.h`) and checked by `agent_series_cap_test` and
`agent_cardinality_test`:
- No label carries an iteration index, an SL or a pid (`pid`, `iter`, `iteration`, `seq_len`,
  `sl`, `tid`): their values are unbounded. Per-run families are labelled by `run` and by names
  from bounded sets (`metric`, `unit`, `group`, `collector`, `reason`, `direction`, `profiler`).
- The attribution of a run is on `seqpoint_run_info` (`launcher`, `job_id`, `step` (a Slurm job
  step), `job_name`, `world_size`, `node`); dashboards join it on `run`. On remote-write every
  per-run series carries these labels itself (those that are set), so a series is found by job
  without a join. `job_name` and `world_size` are read from the first rank's environment
  (`SEQPOINT_JOB_NAME`, `SLURM_JOB_NAME`, `PBS_JOBNAME`, `LSB_JOBNAME`; `WORLD_SIZE`,
  `SLURM_NTASKS`, `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`), `node` is the host name (or the
  daemon's own `SEQPOINT_NODE_NAME`). Every value
  read from the environment is sanitized (printable ASCII without quotes or backslashes; others
  become `_`) and cut at 128 bytes; `world_size` must be digits; no label value passes 256 bytes.
- Every layer that launched the job is named as well, whichever one the run key names, so that
  torchrun inside an sbatch job keeps its Slurm job id: `slurm_job_id`, `slurm_step`
  (`SLURM_JOB_ID`, `SLURM_STEP_ID`, else the `job_<id>`/`step_<id>` of the process's cgroup, v1
  or v2), `k8s_namespace`, `k8s_pod` (`POD_NAMESPACE`, `POD_NAME`, else the pod's service-account
  namespace file and `HOSTNAME`, read only for a process in a kubepods cgroup) and
  `launcher_run` (torchrun's `TORCHELASTIC_RUN_ID`, MPI's `PMIX_NAMESPACE` or Open MPI's job
  id); on `seqpoint_run_info` and, where set, on every uploaded per-run series.
- The fleet families (`seqpoint_fleet_bin_*`) are labelled by `run`, `node`, `fleet_job` (the
  job the nodes are compared within: `run:<launcher_run>`, else `slurm:<slurm_job_id>`, else
  `name:<job_name>`, else the run key) and `bin`, an SL octave such as `64-127` (at most 32
  values, never an SL). Only a run's main bins are exported: at most 3, each with 20 iterations
  or more. A run adds at most 15 series (9 without energy): 64 runs at most 960.
- The straggler families of a data-parallel run (`seqpoint_run_collective_steps_total`,
  `seqpoint_run_straggler_*`, `seqpoint_run_rank_*`, `seqpoint_run_*detectable_slowdown`;
  `agent/fleet/straggler_metrics.h`) are labelled by `run`, `node`, `fleet_job`, `cause`
  (`data`, `hardware`) and `rank`: ranks 0-15 by number, any other (or unknown) as `other`.
  Counts per run, never per step: at most 91 series a run, only for ranks and causes seen.
- Gauges (`seqpoint_run_gauge_*`) are labelled by `run`, `metric` and `unit`: one series per
  family for each gauge its collectors give, a set fixed by the configuration (NVML: 7
  readings and the capacity per GPU the process uses, plus the configured GPM metrics and field
  ids; ROCm SMI likewise), never per SL bin (the per-bin means and peaks are in `seqpoint show`
  only). `seqpoint_run_gpu_memory_exceed_seq_len` adds `extrapolated` ("0"/"1"): one series per
  GPU memory gauge whose fit holds.
- At most `runs.max_series` per-run series per node (default 20000, on `/metrics` and in each
  upload). Runs are added in run order; a run whose series would pass the cap is left out whole
  and counted in `seqpoint_series_overflow_runs_total`; `seqpoint_series` is the count
  exported, `seqpoint_series_dropped` what the cap left out. A run costs about 50 series
  (64 replayed runs: 3,202 series), so the default holds some 400 concurrent runs on a node.

## Families

Alerting and recording rules and a Grafana dashboard over these names ship with the package:
`packaging/prometheus/seqpoint-rules.yml` (with its `promtool test rules` tests) and
`packaging/grafana/seqpoint-dashboard.json`, installed under `/usr/share/seqpoint/`.

This file is generated: `scripts/gen-metrics-doc.py` (from `tests/golden/metrics.txt`).

| family | type | labels | uploaded | help |
|---|---|---|---|---|
"""


def families(path):
    out, cur = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# TYPE "):
                _, _, name, typ = line.split(" ", 3)
                cur = {"name": name, "type": typ, "help": "", "labels": set()}
                out.append(cur)
            elif line.startswith("# HELP "):
                cur["help"] = line.split(" ", 3)[3]
            elif line and cur is not None:
                inner = line[line.index("{") + 1:line.rindex("}")]
                cur["labels"].update(x for x in inner.split(",") if x)
    return out


def render(fams):
    rows = []
    for f in fams:
        labels = ", ".join(f"`{l}`" for l in sorted(f["labels"])) or "-"
        help_text = f["help"].replace("|", "\\|")
        up = "yes" if f["name"] in UPLOADED else ""
        rows.append(f"| `{f['name']}` | {f['type']} | {labels} | {up} | {help_text} |")
    return HEADER + "\n".join(rows) + "\n"


def main():
    fams = families(GOLDEN) + families(GOLDEN_STRAGGLERS)
    text = render(sorted(fams, key=lambda f: f["name"]))
    if "--check" in sys.argv:
        with open(DOC) as f:
            if f.read() != text:
                sys.stderr.write("docs/metrics.md is stale: run scripts/gen-metrics-doc.py\n")
                return 1
        return 0
    with open(DOC, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
