// scan_lookup.hpp — importlib.metadata's rules for recognising and naming
// metadata directories (Lookup, PathDistribution._name_from_stem,
// Prepared.normalize), shared by the directory and zip scanners.
#pragma once

#include <string>       // key output
#include <string_view>  // names in

namespace epload::detail {

/// What Lookup makes of one child of a search path.
enum class ChildKind {
  none,  ///< not metadata
  info,  ///< `*.dist-info` / `*.egg-info`, any case: goes to Lookup.infos
  egg,   ///< `egg-info` (any case) inside a `*.egg` path: Lookup.eggs
};

/// Classifies `child` (a directory-entry name).  `base_is_egg` is
/// os.path.basename(search_path).lower().endswith(".egg").
///
/// Comparing ASCII case-insensitively is exact here although Python uses
/// full Unicode str.lower(): the only non-ASCII character that lower-cases
/// to ASCII is U+212A KELVIN SIGN (to "k"), and no suffix contains a "k".
ChildKind classify_child(std::string_view child, bool base_is_egg);

/// True when basename(path).lower() ends with ".egg" (trailing '/' gives an
/// empty basename, as in os.path.basename).
bool base_is_egg(std::string_view search_path);

/// Lookup's grouping key of an `info` child:
/// normalize(child.lower().rpartition('.')[0].partition('-')[0]).  Appends.
void lookup_key(std::string_view child, std::string& out);

/// PathDistribution._normalized_name when it comes from the file name: the
/// basename's os.path.splitext extension is exactly ".dist-info" or
/// ".egg-info" (case-sensitive) and the part before the first '-' normalizes
/// to a non-empty string.  Appends that and returns true; returns false when
/// importlib would read the Name from the metadata instead.
bool stem_key(std::string_view basename, std::string& out);

/// A basename split as PathDistribution._name_from_stem splits it.
struct StemParts {
  bool ok = false;           ///< extension is exactly .dist-info / .egg-info
  bool dist_info = false;    ///< the extension is ".dist-info"
  std::string_view name;     ///< before the first '-'
  std::string_view version;  ///< after the first '-' ("" if none)
};
/// os.path.splitext(basename), then the part before / after the first '-'.
StemParts split_stem(std::string_view basename);

/// True when a `name-version.dist-info` stem can stand for METADATA's Name
/// and Version: the version part is non-empty and uses only the characters
/// of a normalized PEP 440 version (digits, letters, '.', '!', '+'), as the
/// wheel format writes it.  A '-' or '_' there means the name or version was
/// not escaped the way the format requires ("Epsilon-Pkg-2.0.dist-info",
/// "foo-1.0_beta.dist-info"): only METADATA says what importlib reports.
bool stem_names_the_metadata(const StemParts& stem);

}  // namespace epload::detail
