// Helpers shared by the daemon's tests: a temporary directory removed on scope exit, a free
// TCP port, a plain HTTP GET, waiting for a condition (liveness only: a generous deadline, never
// a timing assertion), the recorded traces under tests/data/agent, and the built binaries.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "common/testing/scratch_dir.h"

namespace seqpoint::daemon::testing {

// A fresh directory, removed with everything in it on destruction (common/testing).
using TempDir = seqpoint::testing::ScratchDir;

// A port that was free a moment ago (bind to 0, read it, close).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Polls `done` every 50 ms until it holds or `limit` passes; returns whether it held.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::seconds limit = std::chrono::seconds(120)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

using seqpoint::testing::SourceDir;
inline std::string BinaryDir() {
  const char* s = std::getenv("SEQPOINT_BINARY_DIR");
  return s ? s : SEQPOINT_TEST_BINARY_DIR;
}
// A trace recorded from the real trainer (examples/seqpoint-train), see tests/data/agent.
inline std::string RecordedTrace() { return SourceDir() + "/tests/data/agent/gru_debian_1500.csv"; }
inline std::string SeqpointdBinary() { return BinaryDir() + "/agent/daemon/seqpointd"; }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace seqpoint::daemon::testing
