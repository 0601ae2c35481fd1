// enum_names.hpp — an enum's names as one table, in the order of its values:
// a value's name, and the value a name spells.  One table per enum instead of
// a switch and a parser written out for each.
#pragma once

#include <cstddef>      // size_t
#include <optional>     // parse_enum
#include <string_view>  // parse_enum

namespace epload::detail {

/// The name of `value`, from `names` listing the enum's names for the values
/// 0, 1, 2, ...; "?" for a value past the table.
template <class E, std::size_t N>
constexpr const char* enum_name(E value, const char* const (&names)[N]) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

/// The value whose name in `names` (as for enum_name) is `text`; nullopt
/// when none is.
template <class E, std::size_t N>
constexpr std::optional<E> parse_enum(std::string_view text, const char* const (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace epload::detail
