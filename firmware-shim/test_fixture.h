// Test helpers: the real captured gpu_metrics tables (tests/data/gpu_metrics, located through
// SEQPOINT_SOURCE_DIR, which seqpoint_add_test sets) and a fixture sysfs tree built from them
// in a temporary directory, laid out like a real /sys/class/drm with amdgpu hwmon files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/testing/scratch_dir.h"

namespace seqpoint::firmware::testing {

using seqpoint::testing::SourceDir;
// Bytes of tests/data/gpu_metrics/<name>; aborts the test run if missing.
std::vector<uint8_t> ReadBlob(const std::string& name);

void WriteFile(const std::string& path, const std::string& content);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);

// A fresh directory, removed with its contents on destruction (common/testing).
using TempDir = seqpoint::testing::ScratchDir;

// Builds the standard fixture under `root` (see test_fixture.cpp for the devices). The hwmon
// attribute card0/.../power1_input is a FIFO: the returned fd holds its write end open, so
// readers see EAGAIN, like a broken hwmon driver. Close it when done (-1 if no FIFO).
int BuildStandardFixture(const std::string& root);

}  // namespace seqpoint::firmware::testing
