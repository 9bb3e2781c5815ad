// See elf_file.h. Layouts: <elf.h> and the SystemTap SDT note format
// (https://sourceware.org/systemtap/wiki/UserSpaceProbeImplementation): note owner "stapsdt",
// type 3, descriptor = pc, base, semaphore (3 x 8 bytes on 64-bit), then provider\0 name\0
// args\0.
#include "probes/discovery/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string_view>

namespace seqpoint::probes {
namespace {

constexpr uint32_t kStapsdtNoteType = 3;

// A read-only mapping of a whole file, released on scope exit.
class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      std::string msg = "opening " + path + ": " + std::strerror(err);
      return err == ENOENT ? NotFound(msg) : err == EACCES ? PermissionDenied(msg) : IoError(msg);
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
      ::close(fd);
      return InvalidArgument(path + " is not a non-empty regular file, so not an ELF binary");
    }
    void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data == MAP_FAILED) return IoError("mapping " + path + ": " + std::strerror(errno));
    return MappedFile(static_cast<const unsigned char*>(data), static_cast<size_t>(st.st_size));
  }
  MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) munmap(const_cast<unsigned char*>(data_), size_);
  }
  // A pointer to [offset, offset + len) or nullptr when that range is outside the file.
  const unsigned char* At(uint64_t offset, uint64_t len) const {
    if (offset > size_ || len > size_ - offset) return nullptr;
    return data_ + offset;
  }

 private:
  MappedFile(const unsigned char* data, size_t size) : data_(data), size_(size) {}
  const unsigned char* data_;
  size_t size_;
};

struct Section {
  Elf64_Shdr header;
  std::string_view name;
};

// Calls fn for each section header; stops early when fn returns false.
Status ForEachSection(const MappedFile& file, const std::string& path,
                      const std::function<bool(const Section&)>& fn) {
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(file.At(0, sizeof(Elf64_Ehdr)));
  if (eh == nullptr || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
    return InvalidArgument(path + " is not an ELF file");
  }
  if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB) {
    return Unsupported(path + " is not a 64-bit little-endian ELF file");
  }
  if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0) return Status::Ok();
  const auto* shdrs = reinterpret_cast<const Elf64_Shdr*>(
      file.At(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr)));
  if (shdrs == nullptr || eh->e_shstrndx >= eh->e_shnum) {
    return InvalidArgument(path + ": section headers lie outside the file (truncated?)");
  }
  const Elf64_Shdr& strtab = shdrs[eh->e_shstrndx];
  const auto* names = reinterpret_cast<const char*>(file.At(strtab.sh_offset, strtab.sh_size));
  for (uint16_t i = 0; i < eh->e_shnum; ++i) {
    std::string_view name;
    if (names != nullptr && shdrs[i].sh_name < strtab.sh_size) {
      const char* start = names + shdrs[i].sh_name;
      name = std::string_view(start, strnlen(start, strtab.sh_size - shdrs[i].sh_name));
    }
    if (!fn(Section{shdrs[i], name})) break;
  }
  return Status::Ok();
}

uint64_t Align4(uint64_t v) { return (v + 3) & ~uint64_t{3}; }

}  // namespace

Result<std::vector<UsdtNote>> ReadUsdtNotes(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  std::vector<UsdtNote> notes;
  Status status = ForEachSection(*file, path, [&](const Section& s) {
    if (s.header.sh_type != SHT_NOTE || s.name != ".note.stapsdt") return true;
    const unsigned char* data = file->At(s.header.sh_offset, s.header.sh_size);
    if (data == nullptr) return false;
    uint64_t off = 0;
    while (off + sizeof(Elf64_Nhdr) <= s.header.sh_size) {
      Elf64_Nhdr nh;
      std::memcpy(&nh, data + off, sizeof(nh));
      uint64_t name_off = off + sizeof(nh);
      uint64_t desc_off = name_off + Align4(nh.n_namesz);
      uint64_t next = desc_off + Align4(nh.n_descsz);
      if (next > s.header.sh_size) break;
      const char* desc = reinterpret_cast<const char*>(data + desc_off);
      if (nh.n_type == kStapsdtNoteType && nh.n_namesz == 8 &&
          std::memcmp(data + name_off, "stapsdt", 8) == 0 && nh.n_descsz > 24) {
        std::string_view strings(desc + 24, nh.n_descsz - 24);
        size_t p_end = strings.find('\0');
        size_t n_end = p_end == std::string_view::npos ? p_end : strings.find('\0', p_end + 1);
        if (n_end != std::string_view::npos) {
          notes.push_back({std::string(strings.substr(0, p_end)),
                           std::string(strings.substr(p_end + 1, n_end - p_end - 1))});
        }
      }
      off = next;
    }
    return true;
  });
  if (!status.ok()) return status;
  return notes;
}

Result<bool> HasSeqpointProvider(const std::string& path) {
  auto notes = ReadUsdtNotes(path);
  if (!notes.ok()) return notes.status();
  bool begin = false, end = false;
  for (const UsdtNote& n : *notes) {
    if (n.provider != "seqpoint") continue;
    begin = begin || n.name == "iteration_begin";
    end = end || n.name == "iteration_end";
  }
  return begin && end;
}

Result<bool> HasFunctionSymbol(const std::string& path, const std::string& name) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  std::vector<Elf64_Shdr> all;
  Status status = ForEachSection(*file, path, [&](const Section& s) {
    all.push_back(s.header);
    return true;
  });
  if (!status.ok()) return status;
  for (const Elf64_Shdr& sh : all) {
    if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_link >= all.size()) {
      continue;
    }
    const Elf64_Shdr& strs = all[sh.sh_link];
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(file->At(sh.sh_offset, sh.sh_size));
    const auto* names = reinterpret_cast<const char*>(file->At(strs.sh_offset, strs.sh_size));
    if (syms == nullptr || names == nullptr || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
    for (uint64_t i = 0; i < sh.sh_size / sizeof(Elf64_Sym); ++i) {
      const Elf64_Sym& sym = syms[i];
      int type = ELF64_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
          sym.st_name >= strs.sh_size) {
        continue;
      }
      const char* sym_name = names + sym.st_name;
      size_t len = strnlen(sym_name, strs.sh_size - sym.st_name);
      if (std::string_view(sym_name, len) == name) return true;
    }
  }
  return false;
}

}  // namespace seqpoint::probes
