// A --savable model's state in memory (npu_sim's main loop: rtl/sim/npu_sim_main.cpp), and
// the check that makes a state from a file safe to hand to Verilator's reader.
//
// Verilator's serialisation of a model is its header, then per module a check value (a hash
// of the module's layout), the simulation context (a fixed block and two strings with u32
// lengths) and every variable (fixed sizes, as this model has no string, queue or
// associative-array variables), then a trailer. Its reader trusts all of it: a wrong check
// value or header ends the process (VL_FATAL), and a string length is allocated as given.
// So a state that did not come from this process is never read as it is:
// `sanitise_state` walks it against a template (a state this process saved itself, so of
// the same layout), checks the header, every check value and the trailer, bounds every
// string length, and returns the state with the template's context blocks in place of the
// candidate's. Verilator then reads exactly the template's layout: every allocation is the
// template's, and the context (time, error counts, flags) is this process's own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "verilated.h"
#include "verilated_save.h"

namespace npu_state {

// A state saved into memory (Verilator's VerilatedSave writes only to files).
class BytesSave final : public VerilatedSerialize {
  public:
    explicit BytesSave(std::vector<uint8_t>& out) : m_out(out) {
        m_out.clear();
        m_isOpen = true;
        header();
    }
    ~BytesSave() override { close(); }
    void flush() override {
        m_out.insert(m_out.end(), m_bufp, m_cp);
        m_cp = m_bufp;
    }
    void close() override {
        if (!m_isOpen) return;
        trailer();
        flush();
        m_isOpen = false;
    }

  private:
    std::vector<uint8_t>& m_out;
};

// A state read from memory. Past the end it reads zeros, as Verilator's file reader does;
// a state that passed `sanitise_state` is never read past its end.
class BytesRestore final : public VerilatedDeserialize {
  public:
    BytesRestore(const uint8_t* data, size_t size) : m_data(data), m_size(size) {
        m_isOpen = true;
        m_cp = m_bufp;
        m_endp = m_bufp;
        header();
    }
    ~BytesRestore() override { close(); }
    void close() override {
        if (!m_isOpen) return;
        trailer();
        m_isOpen = false;
    }

  protected:
    void fill() override {
        const size_t kept = static_cast<size_t>(m_endp - m_cp);
        std::memmove(m_bufp, m_cp, kept);
        m_cp = m_bufp;
        m_endp = m_bufp + kept;
        const size_t room = bufferSize() - kept;
        const size_t take = std::min(room, m_size - m_pos);
        std::memcpy(m_endp, m_data + m_pos, take);
        m_pos += take;
        m_endp += take;
        std::memset(m_endp, 0, room - take);
        m_endp += room - take;
    }

  private:
    const uint8_t* m_data;
    size_t m_size;
    size_t m_pos = 0;
};

constexpr size_t kCheckBytes = 8;       // a module's check value, just before its context
constexpr size_t kTrailerBytes = 8;     // "vltsaved"
constexpr size_t kHeaderBytes = 16;     // "verilatorsave02\n"
constexpr uint32_t kMaxString = 4096;   // a context string (time unit suffix, dump file)

// The marker a canonical save writes in place of the context's fixed block (HarnessState in
// npu_sim_main.cpp): it lets `context_offsets` find the blocks in a state of ours.
inline void fill_marker(void* block) {
    static const char kPattern[] = "npu-emu context block   ";  // 24 bytes
    auto* out = static_cast<uint8_t*>(block);
    for (size_t i = 0; i < VerilatedContext::serialized1Size(); ++i)
        out[i] = static_cast<uint8_t>(kPattern[i % (sizeof(kPattern) - 1)]);
}

// Where the context records start in `state` (one of ours, saved canonically).
inline std::vector<size_t> context_offsets(const std::vector<uint8_t>& state) {
    std::vector<uint8_t> marker(VerilatedContext::serialized1Size());
    fill_marker(marker.data());
    std::vector<size_t> out;
    if (state.size() < marker.size()) return out;
    for (size_t i = 0; i + marker.size() <= state.size();) {
        if (std::memcmp(state.data() + i, marker.data(), marker.size()) == 0) {
            out.push_back(i);
            i += marker.size();
        } else {
            ++i;
        }
    }
    return out;
}

// The length of the context record at `at` (the block and two strings), or 0 when it does
// not fit `size` bytes or a string is longer than kMaxString.
inline size_t record_bytes(const uint8_t* state, size_t size, size_t at) {
    size_t pos = at + VerilatedContext::serialized1Size();
    for (int s = 0; s < 2; ++s) {
        uint32_t len = 0;
        if (pos > size || size - pos < sizeof(len)) return 0;
        std::memcpy(&len, state + pos, sizeof(len));
        if (len > kMaxString) return 0;
        pos += sizeof(len);
        if (size - pos < len) return 0;
        pos += len;
    }
    return pos - at;
}

// `candidate` made safe for Verilator's reader (see the top of this file), or an empty
// vector with `why` set. `tmpl` is a canonical state of this process, `offsets` its
// context records (`context_offsets`).
inline std::vector<uint8_t> sanitise_state(const std::vector<uint8_t>& tmpl,
                                           const std::vector<size_t>& offsets,
                                           const uint8_t* candidate, size_t size,
                                           std::string& why) {
    std::vector<uint8_t> out;
    if (offsets.empty() || tmpl.size() < kHeaderBytes + kTrailerBytes) {
        why = "this model keeps no state to check against";
        return {};
    }
    if (size < kHeaderBytes + kTrailerBytes ||
        std::memcmp(candidate, tmpl.data(), kHeaderBytes) != 0) {
        why = "not a saved state of a Verilator model (no header)";
        return {};
    }
    out.reserve(tmpl.size());
    size_t t_pos = 0;  // in the template
    size_t c_pos = 0;  // in the candidate
    for (size_t at : offsets) {
        const size_t fixed = at - t_pos;  // variables, then the next module's check value
        if (size - c_pos < fixed + VerilatedContext::serialized1Size()) {
            why = "it is shorter than this model's state";
            return {};
        }
        if (std::memcmp(candidate + c_pos + fixed - kCheckBytes, tmpl.data() + at - kCheckBytes,
                        kCheckBytes) != 0) {
            why = "it was saved by another model (a module's layout check differs)";
            return {};
        }
        out.insert(out.end(), candidate + c_pos, candidate + c_pos + fixed);
        const size_t theirs = record_bytes(candidate, size, c_pos + fixed);
        const size_t ours = record_bytes(tmpl.data(), tmpl.size(), at);
        if (theirs == 0 || ours == 0) {
            why = "a context string's length is out of bounds";
            return {};
        }
        out.insert(out.end(), tmpl.data() + at, tmpl.data() + at + ours);
        t_pos = at + ours;
        c_pos += fixed + theirs;
    }
    const size_t rest = tmpl.size() - t_pos;  // the last module's variables and the trailer
    if (size - c_pos != rest) {
        why = "its size is not this model's (" + std::to_string(size) + " bytes)";
        return {};
    }
    if (std::memcmp(candidate + size - kTrailerBytes, tmpl.data() + tmpl.size() - kTrailerBytes,
                    kTrailerBytes) != 0) {
        why = "it has no trailer (cut or padded)";
        return {};
    }
    out.insert(out.end(), candidate + c_pos, candidate + size);
    return out;
}

}  // namespace npu_state
