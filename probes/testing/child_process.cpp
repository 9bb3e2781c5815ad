// See child_process.h.
#include "probes/testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace seqpoint::probes::testing {
namespace {

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    return IoError(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const std::string& e : env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (err != 0) {
    close(in[1]);
    close(out[0]);
    return NotFound("spawning " + argv[0] + ": " + std::strerror(err));
  }
  return ChildProcess(pid, in[1], out[0]);
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(o.pid_),
      stdin_fd_(o.stdin_fd_),
      stdout_fd_(o.stdout_fd_),
      buffer_(std::move(o.buffer_)),
      reaped_(o.reaped_) {
  o.pid_ = 0;
  o.stdin_fd_ = o.stdout_fd_ = -1;
  o.reaped_ = true;
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    Kill();
    (void)Wait(5000);
  }
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

Result<std::string> ChildProcess::ReadLine(int timeout_ms) {
  int64_t deadline = NowMs() + timeout_ms;
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    int64_t left = deadline - NowMs();
    if (left <= 0) return Unavailable("no line from pid " + std::to_string(pid_) + " in time");
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[512];
    ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n <= 0) return Unavailable("pid " + std::to_string(pid_) + " closed its stdout");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

Status ChildProcess::WriteLine(const std::string& line) {
  std::string data = line + "\n";
  if (write(stdin_fd_, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    return IoError("writing to pid " + std::to_string(pid_) + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<int> ChildProcess::Wait(int timeout_ms) {
  auto status = WaitStatus(timeout_ms);
  if (!status.ok()) return status.status();
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
}

Result<int> ChildProcess::WaitStatus(int timeout_ms) {
  if (reaped_) return InvalidArgument("already reaped");
  int64_t deadline = NowMs() + timeout_ms;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return status;
    }
    if (r < 0) return IoError(std::string("waitpid: ") + std::strerror(errno));
    if (NowMs() > deadline) return Unavailable("pid " + std::to_string(pid_) + " still running");
    usleep(2000);
  }
}

void ChildProcess::Kill() {
  if (!reaped_ && pid_ > 0) kill(pid_, SIGKILL);
}

std::string BuildPath(const std::string& relative) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  // The build tree's root is the nearest folder above the test binary with a CMakeCache.txt,
  // so a binary may sit at any depth (probes/, probes/tool/, ...).
  while (!dir.empty()) {
    dir.erase(dir.rfind('/'));
    if (!dir.empty() && access((dir + "/CMakeCache.txt").c_str(), F_OK) == 0) break;
  }
  if (dir.empty()) {
    const char* root = std::getenv("SEQPOINT_BINARY_DIR");
    dir = root != nullptr ? root : ".";
  }
  return dir + "/" + relative;
}

std::string TestProgram(const std::string& name) {
  return BuildPath("probes/testing/" + name);
}

bool CanUseBpf() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "SKIP: eBPF probe tests need root (CI runs them as root)\n");
    return false;
  }
  return true;
}

}  // namespace seqpoint::probes::testing
