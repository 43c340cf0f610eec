// Serialisation of unpacked structs for --savable models (npu_sim's `systemc_header puts
// it into the model's root header, before the generated save and restore code).
//
// Verilator 5.048 saves every variable of a --savable model but unpacked structs (PeakRDL
// regblock's hwif_in/hwif_out and field storage): it emits `os << s` for them with no
// operator for the struct's generated type. Such a type holds only fixed-width members
// (CData..QData, VlWide, nested structs of them): trivially copyable, its bytes are its
// state. A checkpoint is restored only into the same model build (the server checks the
// digest), so the layout is the same on both sides. Verilator's own overloads (exact
// matches, or more specialised templates such as VlWide's) still win over these.
#pragma once

#include <cstddef>
#include <type_traits>

#include "verilated.h"
#include "verilated_save.h"

template <typename T,
          typename = std::enable_if_t<std::is_class_v<T> && std::is_trivially_copyable_v<T>>>
inline VerilatedSerialize& operator<<(VerilatedSerialize& os, T& rhs) {
    return os.write(&rhs, sizeof(T));
}

template <typename T,
          typename = std::enable_if_t<std::is_class_v<T> && std::is_trivially_copyable_v<T>>>
inline VerilatedDeserialize& operator>>(VerilatedDeserialize& os, T& rhs) {
    return os.read(&rhs, sizeof(T));
}
