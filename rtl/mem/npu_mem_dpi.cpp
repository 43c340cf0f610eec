// Storage of the DDR models: a file mapped with mmap(MAP_SHARED), so that another process
// (the device server) can read and write host-visible memory while the simulation runs,
// without any of it passing through the simulator. Called once per data beat from the
// SystemVerilog models (npu_axi_mem.sv); no Python runs here.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "svdpi.h"
#include "verilated.h"

namespace {

struct NpuMem {
    std::string name;
    std::string path;
    uint8_t* base;
    uint64_t size;
};

[[noreturn]] void fail(const NpuMem& m, const char* what) {
    std::fprintf(stderr, "npu_mem(%s): %s %s: %s\n", m.name.c_str(), what,
                 m.path.empty() ? "(anonymous)" : m.path.c_str(), std::strerror(errno));
    std::fflush(stderr);
    std::exit(3);
}

// The open memories, by slot (the models' DpiSlot parameters: constants of the build, so
// nothing in a restored model state selects an entry; every access checks its slot anyway).
constexpr unsigned kSlots = 8;
NpuMem* g_memories[kSlots] = {};

// The memory in `slot`, or nullptr (a slot never opened: the access is answered with zeros
// and writes nothing, as for an offset outside the memory).
inline NpuMem* memory_at(unsigned slot) { return slot < kSlots ? g_memories[slot] : nullptr; }

// [offset, offset + nbytes) lies inside `m` (no wrap-around of the 64-bit sum) and fits the
// 1024-bit DPI vector.
inline bool inside(const NpuMem& m, unsigned long long offset, unsigned nbytes) {
    return nbytes <= 128 && offset <= m.size && nbytes <= m.size - offset;
}

// The path the plusarg +npu_mem_<name>=PATH gives ("" without one: private memory).
std::string plusarg_path(const std::string& name) {
    const std::string prefix = "npu_mem_" + name + "=";
    const std::string match = Verilated::threadContextp()->commandArgsPlusMatch(prefix.c_str());
    return match.empty() ? std::string() : match.substr(prefix.size() + 1);  // after "+"
}

}  // namespace

extern "C" void npu_mem_open(unsigned slot, const char* name, unsigned long long size) {
    auto* m = new NpuMem{name ? name : "?", "", nullptr, size};
    m->path = plusarg_path(m->name);
    if (slot >= kSlots || g_memories[slot] != nullptr) {
        errno = EINVAL;
        fail(*m, "slot taken or out of range for");
    }
    void* addr = MAP_FAILED;
    if (m->path.empty()) {
        addr = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (addr == MAP_FAILED) fail(*m, "cannot map");
    } else {
        int fd = open(m->path.c_str(), O_RDWR | O_CREAT, 0600);
        if (fd < 0) fail(*m, "cannot open");
        struct stat st {};
        if (fstat(fd, &st) != 0) fail(*m, "cannot stat");
        // Grow (sparse) to the memory's size; never shrink a file someone else sized.
        if (static_cast<uint64_t>(st.st_size) < size && ftruncate(fd, static_cast<off_t>(size)) != 0)
            fail(*m, "cannot size");
        addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (addr == MAP_FAILED) fail(*m, "cannot map");
        close(fd);  // the mapping keeps the file
    }
    m->base = static_cast<uint8_t*>(addr);
    g_memories[slot] = m;
}

extern "C" void npu_mem_read(unsigned slot, unsigned long long offset, unsigned nbytes,
                             svBitVecVal* data) {
    std::memset(data, 0, 128);
    const NpuMem* m = memory_at(slot);
    if (m == nullptr || !inside(*m, offset, nbytes)) return;  // the model answers SLVERR
    std::memcpy(data, m->base + offset, nbytes);  // little-endian host: lane i = byte i
}

extern "C" void npu_mem_write(unsigned slot, unsigned long long offset, unsigned nbytes,
                              const svBitVecVal* data, const svBitVecVal* strb) {
    NpuMem* m = memory_at(slot);
    if (m == nullptr || !inside(*m, offset, nbytes)) return;
    const auto* src = reinterpret_cast<const uint8_t*>(data);
    uint8_t* dst = m->base + offset;
    bool full = true;
    for (unsigned w = 0; w < (nbytes + 31) / 32; ++w) {
        uint32_t want = (nbytes - w * 32 >= 32) ? 0xffffffffu : ((1u << (nbytes - w * 32)) - 1);
        if ((strb[w] & want) != want) { full = false; break; }
    }
    if (full) {
        std::memcpy(dst, src, nbytes);
        return;
    }
    for (unsigned i = 0; i < nbytes; ++i) {
        if ((strb[i / 32] >> (i % 32)) & 1u) dst[i] = src[i];
    }
}
