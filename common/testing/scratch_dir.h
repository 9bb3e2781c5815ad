// Test support shared by every folder's tests: a scratch directory and the source tree.
#pragma once

#include <string>

namespace seqpoint::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/relative.
  std::string File(const std::string& relative) const { return path_ + "/" + relative; }
  // Writes `content` to path()/relative, creating parent directories; returns the file's path.
  std::string Write(const std::string& relative, const std::string& content) const;
  void Mkdir(const std::string& relative) const;
  void Symlink(const std::string& target, const std::string& relative) const;

 private:
  std::string path_;
};

// $SEQPOINT_SOURCE_DIR (ctest sets it), else the source tree the tests were built from.
std::string SourceDir();

}  // namespace seqpoint::testing
