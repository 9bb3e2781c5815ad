// Run keys from what launchers put in real processes' environments (children started here with
// torchrun's, Slurm's, MPI's variables), and from captured-shape procfs files for what a test
// cannot make for real (a Kubernetes pod's cgroup).
#include "agent/source/run_key.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "agent/config/config_validate.h"
#include "common/testing/scratch_dir.h"

namespace seqpoint::daemon {
namespace {

// /proc/PID/environ as read now ("" when unreadable).
std::string EnvironOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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
    // environ is readable once exec is done. /proc/PID/exe names sleep a little before the new
    // stack (and its environment) is set up, so an early read found an empty environment (seen
    // in CI): wait until environ holds the first variable.
    const std::string first = env.empty() ? "" : env.front();
    for (int i = 0; i < 400; ++i) {
      char buf[256];
      const ssize_t n =
          readlink(("/proc/" + std::to_string(pid_) + "/exe").c_str(), buf, sizeof buf);
      if (n > 0 && std::string(buf, static_cast<size_t>(n)).find("sleep") != std::string::npos &&
          EnvironOf(pid_).find(first) != std::string::npos) {
        break;
      }
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
  CHECK(AutoKeyOf({"TORCHELASTIC_RUN_ID=abc123", "RANK=1", "SLURM_JOB_ID=77"}) ==
        "torchrun:abc123");
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
  proc.Write(
      "101/cgroup",
      "0::/kubepods.slice/kubepods-besteffort.slice/"
      "kubepods-besteffort-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/cri-containerd-9.scope\n");
  proc.Write("102/environ", std::string("HOME=/\0", 7));
  proc.Write("102/cgroup", "0::/user.slice/user-0.slice/session-1.scope\n");
  const RunGroupBy automatic = *ParseRunGroupBy("auto");
  CHECK(RunKeyFor(automatic, proc.path(), 100, 5) ==
        "k8s:pod-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718");
  CHECK(RunKeyFor(automatic, proc.path(), 101, 5) ==
        "k8s:pod-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718");
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
  LaunchRanks t = ranks_of({"TORCHELASTIC_RUN_ID=j", "RANK=3", "LOCAL_WORLD_SIZE=4", "WORLD_SIZE=8",
                            "SLURM_JOB_ID=5", "SLURM_NTASKS=2"});
  CHECK(t.rank == 3);
  CHECK(t.local_size == 4);  // torchrun under Slurm: torchrun's numbers
  CHECK(t.world_size == 8);
  LaunchRanks s = ranks_of(
      {"SLURM_JOB_ID=5", "SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_STEP_TASKS_PER_NODE=4(x2)"});
  CHECK(s.rank == 0);
  CHECK(s.local_size == 4);
  CHECK(s.world_size == 8);
  // Nodes that run different counts: this node's share is not said; one node runs them all.
  CHECK(
      ranks_of({"SLURM_JOB_ID=5", "SLURM_NTASKS=3", "SLURM_STEP_TASKS_PER_NODE=2,1"}).local_size ==
      0);
  CHECK(ranks_of({"SLURM_JOB_ID=5", "SLURM_NTASKS=3", "SLURM_NNODES=1"}).local_size == 3);
  LaunchRanks m = ranks_of(
      {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2"});
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

namespace seqpoint::daemon {
namespace {

std::string Env(std::initializer_list<const char*> vars) {
  std::string out;
  for (const char* v : vars) out += std::string(v) + '\0';
  return out;
}

}  // namespace

TEST_CASE("launch layers: torchrun inside an sbatch job keeps the Slurm job id") {
  Child c({"TORCHELASTIC_RUN_ID=abc123", "RANK=1", "WORLD_SIZE=8", "SLURM_JOB_ID=4242",
           "SLURM_STEP_ID=0", "SLURM_JOB_NAME=llm"});
  // The run key still follows the launcher (runs keep their grouping) ...
  CHECK(RunKeyFor(*ParseRunGroupBy("auto"), "/proc", c.pid(), 1) == "torchrun:abc123");
  // ... and the labels name both layers.
  const RunJobLabels j = JobLabelsFor("/proc", c.pid());
  CHECK(j.slurm_job_id == "4242");
  CHECK(j.slurm_step == "0");
  CHECK(j.launcher_run == "abc123");
  CHECK(j.job_name == "llm");
  CHECK(j.k8s_namespace.empty());
  CHECK(j.k8s_pod.empty());
  // srun with PMIx: the Slurm step and the MPI namespace; Slurm's older SLURM_STEPID.
  Child m({"SLURM_JOB_ID=77", "SLURM_STEPID=1", "PMIX_NAMESPACE=slurm.pmix.77.1"});
  const RunJobLabels mj = JobLabelsFor("/proc", m.pid());
  CHECK(mj.slurm_job_id == "77");
  CHECK(mj.slurm_step == "1");
  CHECK(mj.launcher_run == "slurm.pmix.77.1");
  // torchrun's default id: the rendezvous endpoint, as in the run key.
  Child t({"TORCHELASTIC_RUN_ID=none", "MASTER_ADDR=n1", "MASTER_PORT=29500"});
  CHECK(JobLabelsFor("/proc", t.pid()).launcher_run == "none@n1:29500");
  // Nothing launched it: no layer, and nothing to keep.
  Child plain({"HOME=/root", "HOSTNAME=node7"});
  const RunJobLabels none = JobLabelsFor("/proc", plain.pid());
  CHECK_FALSE(none.Any());
  CHECK(none.k8s_pod.empty());  // a host's HOSTNAME is no pod
}

TEST_CASE(
    "launch layers: the Slurm job from its cgroup, v1 and v2, when the environment lacks it") {
  seqpoint::testing::ScratchDir proc;
  // v2 (Slurm 22.05+, cgroup/v2 plugin): a batch script that runs torchrun with a clean env.
  proc.Write("200/environ", Env({"TORCHELASTIC_RUN_ID=r9"}));
  proc.Write("200/cgroup", "0::/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0\n");
  // v1 (cgroup/v1 plugin): the job in the cpuset and freezer hierarchies.
  proc.Write("201/environ", Env({"HOME=/"}));
  proc.Write("201/cgroup",
             "12:memory:/slurm/uid_1000/job_77/step_3/task_1\n"
             "5:freezer:/slurm/uid_1000/job_77/step_3\n"
             "0::/user.slice\n");
  // The environment's job wins; the cgroup's step fills a batch script's missing step.
  proc.Write("202/environ", Env({"SLURM_JOB_ID=4242"}));
  proc.Write("202/cgroup", "0::/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0\n");
  // Not Slurm: a "job_" elsewhere, or no digits, is not taken.
  proc.Write("203/environ", Env({"HOME=/"}));
  proc.Write("203/cgroup", "0::/user.slice/job_12/step_1\n");
  proc.Write("204/environ", Env({"HOME=/"}));
  proc.Write("204/cgroup", "0::/system.slice/slurmstepd.scope/job_x1/step_0\n");
  const RunJobLabels v2 = JobLabelsFor(proc.path(), 200);
  CHECK(v2.slurm_job_id == "4242");
  CHECK(v2.slurm_step == "batch");
  CHECK(v2.launcher_run == "r9");
  CHECK(RunKeyFor(*ParseRunGroupBy("auto"), proc.path(), 200, 1) == "torchrun:r9");
  const RunJobLabels v1 = JobLabelsFor(proc.path(), 201);
  CHECK(v1.slurm_job_id == "77");
  CHECK(v1.slurm_step == "3");
  CHECK(JobLabelsFor(proc.path(), 202).slurm_step == "batch");
  CHECK(JobLabelsFor(proc.path(), 203).slurm_job_id.empty());
  CHECK(JobLabelsFor(proc.path(), 204).slurm_job_id.empty());
}

TEST_CASE("launch layers: the Kubernetes namespace and pod of a job in a pod") {
  seqpoint::testing::ScratchDir proc;
  const std::string pod_cgroup =
      "0::/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/cri-containerd-9.scope\n";
  // torchrun in a PyTorchJob's pod: the namespace from the service account, the pod by name.
  proc.Write("300/environ", Env({"TORCHELASTIC_RUN_ID=job-1", "HOSTNAME=trainer-worker-0"}));
  proc.Write("300/cgroup", pod_cgroup);
  proc.Write("300/root/run/secrets/kubernetes.io/serviceaccount/namespace", "ml-team");
  // The downward API's variables win; /var/run where the image has no /run link.
  proc.Write("301/environ", Env({"POD_NAME=p-1", "POD_NAMESPACE=research", "HOSTNAME=h"}));
  proc.Write("301/cgroup", pod_cgroup);
  proc.Write("301/root/var/run/secrets/kubernetes.io/serviceaccount/namespace", "other\n");
  proc.Write("302/environ", Env({"HOSTNAME=trainer-1"}));
  proc.Write("302/cgroup", pod_cgroup);
  proc.Write("302/root/var/run/secrets/kubernetes.io/serviceaccount/namespace", "batch-ns\n");
  const RunJobLabels a = JobLabelsFor(proc.path(), 300);
  CHECK(a.k8s_namespace == "ml-team");
  CHECK(a.k8s_pod == "trainer-worker-0");
  CHECK(a.launcher_run == "job-1");
  CHECK(RunKeyFor(*ParseRunGroupBy("auto"), proc.path(), 300, 1) == "torchrun:job-1");
  const RunJobLabels b = JobLabelsFor(proc.path(), 301);
  CHECK(b.k8s_namespace == "research");
  CHECK(b.k8s_pod == "p-1");
  const RunJobLabels c = JobLabelsFor(proc.path(), 302);
  CHECK(c.k8s_namespace == "batch-ns");
  CHECK(c.k8s_pod == "trainer-1");
  CHECK(c.Any());
}

TEST_CASE("launch layers: the labels in their documented order, empty ones included") {
  RunJobLabels j;
  j.slurm_job_id = "4242";
  j.launcher_run = "abc";
  const auto l = LaunchLayerLabels(j);
  REQUIRE(l.size() == 5);
  CHECK(l[0] == std::pair<std::string, std::string>{"slurm_job_id", "4242"});
  CHECK(l[1].first == "slurm_step");
  CHECK(l[2].first == "k8s_namespace");
  CHECK(l[3].first == "k8s_pod");
  CHECK(l[4] == std::pair<std::string, std::string>{"launcher_run", "abc"});
}
}  // namespace seqpoint::daemon

namespace seqpoint::daemon {
TEST_CASE("node name: the daemon's SEQPOINT_NODE_NAME, else the host name") {
  unsetenv("SEQPOINT_NODE_NAME");
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  CHECK(NodeName() == std::string(host).substr(0, 128));
  setenv("SEQPOINT_NODE_NAME", "rack3-n07 \"x\"", 1);
  CHECK(NodeName() == "rack3-n07__x_");
  setenv("SEQPOINT_NODE_NAME", "", 1);
  CHECK(NodeName() == std::string(host).substr(0, 128));
  unsetenv("SEQPOINT_NODE_NAME");
}
}  // namespace seqpoint::daemon
