// Names for the decoder's outputs: indep_throttle_status bits and the list of known revisions.
#include <algorithm>
#include <iterator>

#include "firmware-shim/gpu_metrics/gpu_metrics.h"
#include "firmware-shim/gpu_metrics/gpu_metrics_layout.h"

namespace seqpoint::firmware {

namespace {

struct ThrottlerBit {
  unsigned bit;
  const char* name;
};

// drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h, SMU_THROTTLER_*_BIT.
constexpr ThrottlerBit kThrottlerBits[] = {
    {0, "ppt0"},          {1, "ppt1"},          {2, "ppt2"},          {3, "ppt3"},
    {4, "spl"},           {5, "fppt"},          {6, "sppt"},          {7, "sppt_apu"},
    {16, "tdc_gfx"},      {17, "tdc_soc"},      {18, "tdc_mem"},      {19, "tdc_vdd"},
    {20, "tdc_cvip"},     {21, "edc_cpu"},      {22, "edc_gfx"},      {23, "apcc"},
    {32, "temp_gpu"},     {33, "temp_core"},    {34, "temp_mem"},     {35, "temp_edge"},
    {36, "temp_hotspot"}, {37, "temp_soc"},     {38, "temp_vr_gfx"},  {39, "temp_vr_soc"},
    {40, "temp_vr_mem0"}, {41, "temp_vr_mem1"}, {42, "temp_liquid0"}, {43, "temp_liquid1"},
    {44, "vrhot0"},       {45, "vrhot1"},       {46, "prochot_cpu"},  {47, "prochot_gfx"},
    {56, "ppm"},          {57, "fit"},
};

}  // namespace

std::vector<std::string> IndepThrottlerNames(uint64_t indep_status) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if ((indep_status >> bit & 1) == 0) continue;
    const auto* it = std::find_if(std::begin(kThrottlerBits), std::end(kThrottlerBits),
                                  [bit](const ThrottlerBit& b) { return b.bit == bit; });
    out.push_back(it != std::end(kThrottlerBits) ? std::string(it->name)
                                                 : "bit_" + std::to_string(bit));
  }
  return out;
}

bool IsPowerThrottled(uint64_t indep_status) { return (indep_status & 0xFFFFu) != 0; }
bool IsThermalThrottled(uint64_t indep_status) {
  return (indep_status & 0x00FFFFFF00000000ull) != 0;
}

std::string SupportedRevisions() {
  std::string out;
  uint16_t last = 0xFFFF;
  for (const LayoutInfo& l : AllLayouts()) {
    const uint16_t key = static_cast<uint16_t>(l.format_revision << 8 | l.content_revision);
    if (key == last) continue;
    last = key;
    if (!out.empty()) out += ' ';
    out += std::to_string(l.format_revision) + "." + std::to_string(l.content_revision);
  }
  return out;
}

}  // namespace seqpoint::firmware
