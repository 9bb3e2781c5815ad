// Run keys from what launchers put in real processes' environments (children started here with
// torchrun's, Slurm's, MPI's variables), and from captured-shape procfs files for what a test
// cannot make for real (a Kubernetes pod's cgroup).
#include "agent/source/run_key.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "agent/config/config_validate.h"
#include "common/testing/scratch_dir.h"

namespace seqpoint::daemon {
namespace {

// A child that sleeps with exactly `env` as its environment; killed on destruction.
class Child {
 public:
  explicit Child(const std::vector<std::string>& env) {
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> envp;
      for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
      char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
      execve("/bin/sleep", argv, envp.data());
      _exit(127);
    }
    // environ is readable once exec is done: wait for /proc/PID/exe to be sleep.
    for (int i = 0; i < 200; ++i) {
      char buf[256];
      const ssize_t n = readlink(("/proc/" + std::to_string(pid_) + "/exe").c_str(), buf, sizeof buf);
      if (n > 0 && std::string(buf, static_cast<size_t>(n)).find("sleep") != std::string::npos) break;
      usleep(5000);
    }
  }
  ~Child() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

std::string AutoKeyOf(const std::vector<std::string>& env) {
  Child c(env);
  return RunKeyFor(*ParseRunGroupBy("auto"), "/proc", c.pid(), 1);
}

}  // namespace

TEST_CASE("run key: the job as its launcher names it, in the documented order") {
  CHECK(AutoKeyOf({"TORCHELASTIC_RUN_ID=abc123", "RANK=1", "SLURM_JOB_ID=77"}) == "torchrun:abc123");
  // torchrun's default id: the rendezvous endpoint tells two jobs on one node apart.
  CHECK(AutoKeyOf({"TORCHELASTIC_RUN_ID=none", "MASTER_ADDR=10.0.0.5", "MASTER_PORT=29500"}) ==
        "torchrun:none@10.0.0.5:29500");
  CHECK(AutoKeyOf({"SLURM_JOB_ID=4242", "SLURM_STEP_ID=3"}) == "slurm:4242.3");
  CHECK(AutoKeyOf({"SLURM_JOB_ID=4242"}) == "slurm:4242");
  CHECK(AutoKeyOf({"PMIX_NAMESPACE=prterun-node1-1234@1", "OMPI_COMM_WORLD_SIZE=8"}) ==
        "mpi:prterun-node1-1234@1");
  CHECK(AutoKeyOf({"OMPI_MCA_orte_ess_jobid=3050831873"}) == "mpi:3050831873");
  CHECK(AutoKeyOf({"PMI_RANK=0", "PMI_SIZE=2"}) == "mpi:proxy-" + std::to_string(getpid()));
  CHECK(AutoKeyOf({"SEQPOINT_RUN_ID=my-run"}) == "my-run");
  // Nothing set: the process alone, never merged with another.
  CHECK(AutoKeyOf({"HOME=/root"}).rfind("pid:", 0) == 0);
}

TEST_CASE("run key: values from the environment are sanitized and bounded") {
  const std::string key = AutoKeyOf({"SLURM_JOB_ID=12\"3\\x y" + std::string(300, 'z')});
  CHECK(key.rfind("slurm:12_3_x_y", 0) == 0);
  CHECK(key.size() <= std::string("slurm:").size() + 128);
}

TEST_CASE("run key: a Kubernetes pod from its cgroup path, both cgroup drivers") {
  seqpoint::testing::ScratchDir proc;
  proc.Write("100/environ", std::string("HOME=/\0", 7));
  proc.Write("100/cgroup",
             "0::/kubepods/burstable/pod1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718/0123abcd\n");
  proc.Write("101/environ", std::string("HOME=/\0", 7));
  proc.Write("101/cgroup",
             "0::/kubepods.slice/kubepods-besteffort.slice/"
             "kubepods-besteffort-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/cri-containerd-9.scope\n");
  proc.Write("102/environ", std::string("HOME=/\0", 7));
  proc.Write("102/cgroup", "0::/user.slice/user-0.slice/session-1.scope\n");
  const RunGroupBy automatic = *ParseRunGroupBy("auto");
  CHECK(RunKeyFor(automatic, proc.path(), 100, 5) == "k8s:pod-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718");
  CHECK(RunKeyFor(automatic, proc.path(), 101, 5) == "k8s:pod-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718");
  CHECK(RunKeyFor(automatic, proc.path(), 102, 5) == "pid:102:5");
  // runs.group_by still overrides the launchers.
  CHECK(RunKeyFor(*ParseRunGroupBy("pid"), proc.path(), 100, 5) == "pid:100:5");
  CHECK(RunKeyFor(*ParseRunGroupBy("cgroup"), proc.path(), 102, 5) ==
        "cgroup:/user.slice/user-0.slice/session-1.scope");
}

}  // namespace seqpoint::daemon

namespace seqpoint::daemon {
TEST_CASE("run key: a rank's number and its job's size on this node, as its launcher says") {
  auto ranks_of = [](const std::vector<std::string>& env) {
    Child c(env);
    return LaunchRanksOf("/proc", c.pid());
  };
  LaunchRanks t = ranks_of({"TORCHELASTIC_RUN_ID=j", "RANK=3", "LOCAL_WORLD_SIZE=4",
                            "WORLD_SIZE=8", "SLURM_JOB_ID=5", "SLURM_NTASKS=2"});
  CHECK(t.rank == 3);
  CHECK(t.local_size == 4);  // torchrun under Slurm: torchrun's numbers
  CHECK(t.world_size == 8);
  LaunchRanks s = ranks_of({"SLURM_JOB_ID=5", "SLURM_PROCID=0", "SLURM_NTASKS=8",
                            "SLURM_STEP_TASKS_PER_NODE=4(x2)"});
  CHECK(s.rank == 0);
  CHECK(s.local_size == 4);
  CHECK(s.world_size == 8);
  // Nodes that run different counts: this node's share is not said; one node runs them all.
  CHECK(ranks_of({"SLURM_JOB_ID=5", "SLURM_NTASKS=3", "SLURM_STEP_TASKS_PER_NODE=2,1"})
            .local_size == 0);
  CHECK(ranks_of({"SLURM_JOB_ID=5", "SLURM_NTASKS=3", "SLURM_NNODES=1"}).local_size == 3);
  LaunchRanks m = ranks_of({"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                            "OMPI_COMM_WORLD_LOCAL_SIZE=2"});
  CHECK(m.rank == 1);
  CHECK(m.local_size == 2);
  CHECK(ranks_of({"PMI_RANK=2", "PMI_SIZE=4", "MPI_LOCALNRANKS=4"}).local_size == 4);
  LaunchRanks none = ranks_of({"SEQPOINT_RUN_ID=x", "RANK=oops"});
  CHECK(none.rank == -1);
  CHECK(none.local_size == 0);
  CHECK(ranks_of({"TORCHELASTIC_RUN_ID=j", "RANK=x1"}).rank == -1);
}

TEST_CASE("run key: launcher and job read back for labels") {
  CHECK(AttributionOf("slurm:4242.3").launcher == "slurm");
  CHECK(AttributionOf("slurm:4242.3").job == "4242");
  CHECK(AttributionOf("slurm:4242.3").step == "3");
  CHECK(AttributionOf("slurm:4242").step == "");
  CHECK(AttributionOf("torchrun:abc").launcher == "torchrun");
  CHECK(AttributionOf("k8s:pod-1f2e").job == "1f2e");
  CHECK(AttributionOf("pid:12:34").launcher == "process");
  CHECK(AttributionOf("my-run").launcher == "env");
}
}  // namespace seqpoint::daemon
