#!/usr/bin/python3
"""Starts N ranks of a data-parallel job on this machine with the environment a real launcher
gives them, so that the job looks to seqpointd as it would under that launcher:

  torchrun  TORCHELASTIC_RUN_ID, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK
  slurm     SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
            SLURM_STEP_TASKS_PER_NODE, SLURM_NNODES (as srun sets them for one node)
  mpi       PMIX_NAMESPACE, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
            OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE (as Open MPI's mpirun does)
  env       SEQPOINT_RUN_ID, RANK, WORLD_SIZE (a job that names itself)

plus MASTER_ADDR=127.0.0.1 and a free MASTER_PORT for the gloo rendezvous. The ranks are this
launcher's children (as under torchrun or a launcher daemon), each running the same command,
as real launchers do (train_torch.py --ddp puts its rank into its --trace).

    examples/launch_ddp.py --ranks 2 --style torchrun --job-id demo -- \\
        /usr/bin/python3 examples/train_torch.py --ddp --iterations 200 \\
        --trace /tmp/demo.rank{rank}.csv

Exit status: 0 when every rank exited 0, else the first failing rank's status (128 + signal
when killed); 2 for a usage error.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys

STYLES = ("torchrun", "slurm", "mpi", "env")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(style, job, rank, ranks, port):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if style == "torchrun":
        env.update(TORCHELASTIC_RUN_ID=job, RANK=str(rank), LOCAL_RANK=str(rank),
                   GROUP_RANK="0", WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(ranks))
    elif style == "slurm":
        env.update(SLURM_JOB_ID=job, SLURM_STEP_ID="0", SLURM_PROCID=str(rank),
                   SLURM_LOCALID=str(rank), SLURM_NTASKS=str(ranks),
                   SLURM_STEP_TASKS_PER_NODE=str(ranks), SLURM_NNODES="1")
    elif style == "mpi":
        env.update(PMIX_NAMESPACE=job, OMPI_COMM_WORLD_RANK=str(rank),
                   OMPI_COMM_WORLD_SIZE=str(ranks), OMPI_COMM_WORLD_LOCAL_RANK=str(rank),
                   OMPI_COMM_WORLD_LOCAL_SIZE=str(ranks))
    else:
        env.update(SEQPOINT_RUN_ID=job, RANK=str(rank), WORLD_SIZE=str(ranks))
    return env


# Variables of every style: a rank must not inherit another launcher's from this shell (the
# run key would follow the first one found).
_CLEARED = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE",
            "OMPI_MCA_orte_ess_jobid", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
            "SEQPOINT_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Start N ranks of a data-parallel job with a launcher's environment "
                    "(torchrun, slurm, mpi or env).")
    p.add_argument("--ranks", type=int, required=True, metavar="N", help="ranks to start (>= 1)")
    p.add_argument("--style", choices=STYLES, default="torchrun",
                   help="whose environment the ranks get (default: %(default)s)")
    p.add_argument("--job-id", default=None, metavar="ID",
                   help="the job's id in that environment (default: ddp-<this pid>)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- then the command every rank runs")
    args = p.parse_args(argv)
    if args.ranks < 1:
        p.error("--ranks must be at least 1, got %d" % args.ranks)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("no command: put the rank's command after --")
    if args.job_id is None:
        args.job_id = "ddp-%d" % os.getpid()
    return args


def main(argv):
    args = parse_args(argv)
    port = free_port()
    children = []
    for rank in range(args.ranks):
        env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
        env.update(rank_env(args.style, args.job_id, rank, args.ranks, port))
        children.append(subprocess.Popen(args.command, env=env))

    def stop(*_):
        for c in children:
            if c.poll() is None:
                c.terminate()
    signal.signal(signal.SIGTERM, stop)
    status = 0
    for c in children:
        code = c.wait()
        if code != 0 and status == 0:
            status = 128 - code if code < 0 else code
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
