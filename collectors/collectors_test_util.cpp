#include "collectors/collectors_test_util.h"

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

namespace seqpoint::collectors::testing {
namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void BurnCpu(int ms) {
  const int64_t until = ThreadCpuNs() + int64_t{ms} * 1'000'000;
  volatile uint64_t sink = 0;
  while (ThreadCpuNs() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
}

bool ReadFull(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The child's command loop. Sleepers wait on a condition variable for a burn request.
[[noreturn]] void ChildMain(int in, int out) {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;
  int burn_ms = 0;
  int pending = 0;
  std::vector<std::thread> sleepers;
  for (;;) {
    int cmd[3];
    if (!ReadFull(in, cmd, sizeof cmd)) _exit(0);
    switch (cmd[0]) {
      case 'b':
        BurnCpu(cmd[1]);
        break;
      case 't': {
        std::vector<std::thread> ts;
        for (int i = 0; i < cmd[1]; ++i) ts.emplace_back(BurnCpu, cmd[2]);
        for (auto& t : ts) t.join();
        break;
      }
      case 's':
        sleepers.emplace_back([&] {
          uint64_t seen = 0;
          for (;;) {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return generation != seen; });
            seen = generation;
            int ms = burn_ms;
            lock.unlock();
            BurnCpu(ms);
            lock.lock();
            if (--pending == 0) cv.notify_all();
          }
        });
        break;
      case 'w': {
        std::unique_lock<std::mutex> lock(mu);
        burn_ms = cmd[1];
        pending = static_cast<int>(sleepers.size());
        ++generation;
        cv.notify_all();
        cv.wait(lock, [&] { return pending == 0; });
        break;
      }
    }
    char done = 'k';
    if (write(out, &done, 1) != 1) _exit(1);
  }
}

}  // namespace

BusyChild::BusyChild() {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return;
  pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    ChildMain(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  pid_ = pid;
  to_child_ = down[1];
  from_child_ = up[0];
}

BusyChild::~BusyChild() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
}

void BusyChild::Command(char op, int arg1, int arg2) {
  int cmd[3] = {op, arg1, arg2};
  if (write(to_child_, cmd, sizeof cmd) != sizeof cmd) std::abort();
  char done;
  if (!ReadFull(from_child_, &done, 1)) std::abort();
}

void BusyChild::BurnMain(int ms) { Command('b', ms, 0); }
void BusyChild::BurnInNewThreads(int threads, int ms) { Command('t', threads, ms); }
void BusyChild::StartSleeper() { Command('s', 0, 0); }
void BusyChild::BurnInSleepers(int ms) { Command('w', ms, 0); }

int BusyChild::ThreadCount() const {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/task")) {
    ++n;
  }
  return n;
}

NamespaceRun RunWithFakeSysClass(const std::string& class_dir,
                                 const std::function<std::string()>& body) {
  NamespaceRun run;
  if (geteuid() != 0) {
    run.output = "needs root (unshare -m and mount)";
    return run;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    run.output = "pipe failed";
    return run;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (unshare(CLONE_NEWNS) != 0) {
      out = std::string("!unshare(CLONE_NEWNS): ") + strerror(errno);
    } else if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      out = std::string("!making / private: ") + strerror(errno);
    } else if (mount(class_dir.c_str(), "/sys/class", nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      out = "!bind-mounting " + class_dir + " over /sys/class: " + strerror(errno);
    } else if (mount("tmpfs", "/dev/shm", "tmpfs", 0, nullptr) != 0) {
      out = std::string("!tmpfs over /dev/shm: ") + strerror(errno);
    } else {
      out = body();
    }
    const char* p = out.data();
    size_t n = out.size();
    while (n > 0) {
      ssize_t w = write(fds[1], p, n);
      if (w <= 0) break;
      p += w;
      n -= static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    run.output = "fork failed";
    return run;
  }
  std::string out;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    run.output = "the namespace child crashed (status " + std::to_string(status) + ")";
    run.ran = true;  // a crash is a test failure, not a skip
    return run;
  }
  if (!out.empty() && out[0] == '!') {
    run.output = out.substr(1);
    return run;
  }
  run.ran = true;
  run.output = out;
  return run;
}

void CopyTree(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  std::filesystem::copy(
      from, to,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
}

}  // namespace seqpoint::collectors::testing
