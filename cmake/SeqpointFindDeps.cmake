# Finds the optional vendor dependencies declared in the top-level CMakeLists.txt.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# eBPF: libbpf via pkg-config, bpftool and clang to build CO-RE objects and skeletons.
pkg_check_modules(LIBBPF IMPORTED_TARGET libbpf)
find_program(BPFTOOL_EXECUTABLE bpftool PATHS /usr/sbin /sbin)
find_program(BPF_CLANG_EXECUTABLE NAMES clang clang-14)
set(_ebpf_found FALSE)
if(LIBBPF_FOUND AND BPFTOOL_EXECUTABLE AND BPF_CLANG_EXECUTABLE)
  set(_ebpf_found TRUE)
endif()
seqpoint_resolve(EBPF _ebpf_found "libbpf-dev, bpftool or clang is missing")

pkg_check_modules(PAPI IMPORTED_TARGET papi)
seqpoint_resolve(PAPI PAPI_FOUND "libpapi-dev (pkg-config papi) is missing")

# ROCm SMI ships a broken CMake config in Debian 12; find the header and library directly.
find_path(ROCM_SMI_INCLUDE_DIR rocm_smi/rocm_smi.h PATHS /opt/rocm/include)
find_library(ROCM_SMI_LIBRARY rocm_smi64 PATHS /opt/rocm/lib)
set(_rocm_found FALSE)
if(ROCM_SMI_INCLUDE_DIR AND ROCM_SMI_LIBRARY)
  set(_rocm_found TRUE)
  add_library(seqpoint_rocm_smi_vendor INTERFACE)
  target_include_directories(seqpoint_rocm_smi_vendor SYSTEM INTERFACE ${ROCM_SMI_INCLUDE_DIR})
  target_link_libraries(seqpoint_rocm_smi_vendor INTERFACE ${ROCM_SMI_LIBRARY})
endif()
seqpoint_resolve(ROCM_SMI _rocm_found "librocm-smi-dev is missing")

string(TOUPPER "${SEQPOINT_WITH_TORCH}" _torch_mode)
if(NOT _torch_mode STREQUAL "OFF")
  find_package(Torch QUIET)
endif()
seqpoint_resolve(TORCH Torch_FOUND "libtorch-dev (TorchConfig.cmake) is missing")

find_package(nlohmann_json 3 REQUIRED)
