// scan_lookup.cpp — see scan_lookup.hpp.  Everything here runs once per
// directory entry, so the ASCII path allocates nothing (callers pass a
// reused output string).
#include "scan_lookup.hpp"

#include "epload/metadata.hpp"  // normalize_name
#include "scan_text.hpp"

namespace epload::detail {

namespace {

bool iends_with(std::string_view s, std::string_view lower_suffix) {
  if (s.size() < lower_suffix.size()) return false;
  const std::string_view tail = s.substr(s.size() - lower_suffix.size());
  for (std::size_t i = 0; i < tail.size(); ++i) {
    char c = tail[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (c != lower_suffix[i]) return false;
  }
  return true;
}

}  // namespace

ChildKind classify_child(std::string_view child, bool base_is_egg) {
  if (iends_with(child, ".dist-info") || iends_with(child, ".egg-info")) return ChildKind::info;
  if (base_is_egg && child.size() == 8 && iends_with(child, "egg-info")) return ChildKind::egg;
  return ChildKind::none;
}

bool base_is_egg(std::string_view search_path) {
  const std::size_t slash = search_path.rfind('/');
  const std::string_view base =
      slash == std::string_view::npos ? search_path : search_path.substr(slash + 1);
  return iends_with(base, ".egg");
}

void lookup_key(std::string_view child, std::string& out) {
  // low.rpartition('.')[0].partition('-')[0] on low = child.lower().  Lower-
  // casing never creates or removes '.' or '-', so for ASCII names the cut can
  // be made first; Unicode names are lowered whole (Final_Sigma looks at
  // neighbours, '.' included).
  auto cut = [](std::string_view low) {
    const std::size_t dot = low.rfind('.');
    low = dot == std::string_view::npos ? std::string_view() : low.substr(0, dot);
    return low.substr(0, low.find('-'));
  };
  if (is_ascii(child)) {
    normalize_name(cut(child), out);  // normalize lower-cases anyway
    return;
  }
  std::string low;
  py_lower(child, low);
  normalize_name(cut(low), out);
}

StemParts split_stem(std::string_view basename) {
  StemParts parts;
  const std::size_t dot = basename.rfind('.');
  if (dot == std::string_view::npos) return parts;
  // posixpath.splitext ignores leading dots: ".dist-info" has no extension.
  if (basename.find_first_not_of('.') >= dot) return parts;
  const std::string_view ext = basename.substr(dot);
  if (ext != ".dist-info" && ext != ".egg-info") return parts;
  const std::string_view filename = basename.substr(0, dot);
  const std::size_t dash = filename.find('-');
  parts.ok = true;
  parts.dist_info = ext == ".dist-info";
  parts.name = filename.substr(0, dash);
  parts.version = dash == std::string_view::npos ? std::string_view() : filename.substr(dash + 1);
  return parts;
}

bool stem_names_the_metadata(const StemParts& stem) {
  if (!stem.ok || !stem.dist_info || stem.name.empty() || stem.version.empty()) return false;
  for (const char c : stem.version) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && c != '.' && c != '!' && c != '+') return false;
  }
  return true;
}

bool stem_key(std::string_view basename, std::string& out) {
  const StemParts parts = split_stem(basename);
  // pass_none(normalize)(name) or super()._normalized_name: an empty result
  // is falsy, so "-1.0.dist-info" is named from its metadata.
  if (!parts.ok || parts.name.empty()) return false;
  const std::size_t before = out.size();
  normalize_name(parts.name, out);
  return out.size() > before;
}

}  // namespace epload::detail
