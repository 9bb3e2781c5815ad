#include "common/testing/scratch_dir.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace seqpoint::testing {

namespace fs = std::filesystem;

ScratchDir::ScratchDir() {
  std::string tmpl = (fs::temp_directory_path() / "seqpoint-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ScratchDir::Write(const std::string& relative, const std::string& content) const {
  const fs::path p = fs::path(path_) / relative;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p.string();
}

void ScratchDir::Mkdir(const std::string& relative) const {
  fs::create_directories(fs::path(path_) / relative);
}

void ScratchDir::Symlink(const std::string& target, const std::string& relative) const {
  const fs::path p = fs::path(path_) / relative;
  fs::create_directories(p.parent_path());
  fs::create_symlink(target, p);
}

std::string SourceDir() {
  const char* env = std::getenv("SEQPOINT_SOURCE_DIR");
  if (env != nullptr && *env != '\0') return env;
  return SEQPOINT_TEST_SOURCE_DIR;
}

}  // namespace seqpoint::testing
