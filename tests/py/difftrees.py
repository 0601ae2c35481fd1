"""Crafted search-path trees for the differential test (test_differential.py).

Each case builds real files under a fresh directory and returns a Case: the
ordered search paths and what importlib.metadata is expected to do with
them.  The expectation only guards the fixtures themselves (a case meant to
exercise an error must really make importlib raise); the comparison that
matters is epload against importlib, made by the test.

Every rule of importlib.metadata's discovery and parsing that epload
reproduces has at least one case; the comment on each says which.  The
discovery cases are here, the entry_points.txt parsing cases in
difftrees_parsing.py, the Case type and the file writers in treekit.py.
CASES holds them all.
"""

import os
import zipfile

import difftrees_parsing  # noqa: F401 - registers the parsing cases in CASES
from treekit import CASES, RAISES, UNSUPPORTED, Case, case, dist, one_dist, write  # noqa: F401 - CASES: the tests read it here


# ---- discovery -----------------------------------------------------------------

@case
def case_insensitive_suffixes(root):
    """*.DIST-INFO / *.Egg-Info match too; such names come from METADATA's Name."""
    site = root / "site"
    dist(site, "Upper-1.0.DIST-INFO", "[g]\nupper = u\n",
         metadata="Name: Upper\nVersion: 1.0\n")
    dist(site, "Mixed-2.0.Egg-Info", "[g]\nmixed = m\n",
         metadata="Name: Mixed\nVersion: 2.0\n", metadata_file="PKG-INFO")
    return Case([str(site)])


@case
def egg_info_file(root):
    """An egg-info FILE is its own PKG-INFO and has no entry points; it still
    shadows a later distribution of the same name."""
    a, b = root / "a", root / "b"
    write(a / "shadow-1.0-py3.11.egg-info", "Metadata-Version: 1.1\nName: shadow\nVersion: 1.0\n")
    dist(b, "shadow-2.0.dist-info", "[g]\nhidden = shadow.new\n")
    dist(b, "visible-1.0.dist-info", "[g]\nvisible = v\n")
    return Case([str(a), str(b)])


@case
def egg_info_file_uppercase(root):
    """'Foo.EGG-INFO' as a file: the name is read from the file itself."""
    a, b = root / "a", root / "b"
    write(a / "Foo.EGG-INFO", "Metadata-Version: 1.1\nName: Foo\nVersion: 3\n")
    dist(b, "foo-1.0.dist-info", "[g]\nhidden = foo\n")
    dist(b, "bar-1.0.dist-info", "[g]\nbar = bar\n")
    return Case([str(a), str(b)])


@case
def egg_directory(root):
    """A *.egg path's EGG-INFO is found; eggs come after the path's infos."""
    egg = root / "thing-1.0-py3.11.egg"
    write(egg / "EGG-INFO" / "PKG-INFO", "Metadata-Version: 1.1\nName: thing\nVersion: 1.0\n")
    write(egg / "EGG-INFO" / "entry_points.txt", "[g]\nthing = thing.main\n")
    dist(egg, "inner-1.0.dist-info", "[g]\ninner = inner\n")
    return Case([str(egg)])


@case
def egg_directory_trailing_slash(root):
    """'x.egg/' has basename '' (os.path.basename), so EGG-INFO is not looked for."""
    egg = root / "slash-1.0.egg"
    write(egg / "EGG-INFO" / "PKG-INFO", "Name: slash\nVersion: 1.0\n")
    write(egg / "EGG-INFO" / "entry_points.txt", "[g]\nslash = s\n")
    dist(egg, "other-1.0.dist-info", "[g]\nother = o\n")
    return Case([str(egg) + "/"])


@case
def first_path_wins(root):
    """Same normalized name on two paths: the first wins; the shadowed copy is
    broken but never read, so importlib does not raise."""
    a, b = root / "a", root / "b"
    dist(a, "My_Pkg-1.0.dist-info", "[g]\nwinner = a\n")
    dist(b, "my.pkg-2.0.dist-info", b"[g]\nbroken \xff no equals\n")
    dist(b, "other-1.0.dist-info", "[g]\nother = b\n")
    return Case([str(a), str(b)])


@case
def shadowing_without_entry_points(root):
    """A dist-info without entry_points.txt still shadows later copies."""
    a, b = root / "a", root / "b"
    dist(a, "quiet-1.0.dist-info")
    dist(b, "quiet-0.9.dist-info", "[g]\nhidden = q\n")
    dist(b, "loud-1.0.dist-info", "[g]\nloud = l\n")
    return Case([str(a), str(b)])


@case
def grouped_by_lookup_key(root):
    """Lookup groups infos by key in first-seen key order, not raw listing order.
    'kN.DIST-INFO' shares its key with 'kN-1.dist-info' but is named otherN by
    its METADATA, so both survive de-duplication and the order shows grouping."""
    site = root / "site"
    for k in range(8):
        dist(site, f"k{k}-1.dist-info", f"[g]\nk{k} = lower{k}\n")
        dist(site, f"K{k}.DIST-INFO", f"[g]\nK{k} = upper{k}\n",
             metadata=f"Name: other{k}\nVersion: 1\n")
    listing = [n.split("-")[0].split(".")[0].lower() for n in os.listdir(site)]
    adjacent = all(listing[i] == listing[i + 1] for i in range(0, len(listing), 2))
    assert not adjacent, "fixture: the listing should interleave keys"
    return Case([str(site)])


@case
def uppercase_suffix_name_from_metadata(root):
    """An uppercase suffix de-duplicates by METADATA's Name, not by the file name."""
    a, b = root / "a", root / "b"
    dist(a, "Dir-Name.DIST-INFO", "[g]\nfrom_upper = u\n",
         metadata="Name: real-name\nVersion: 4.2\n")
    dist(b, "real_name-1.0.dist-info", "[g]\nshadowed = s\n")
    dist(b, "dir_name-1.0.dist-info", "[g]\nnot_shadowed = d\n")
    return Case([str(a), str(b)])


@case
def metadata_empty_falls_back_to_pkg_info(root):
    """'' is falsy: an empty METADATA falls through to PKG-INFO."""
    site = root / "site"
    d = dist(site, "Fallback.DIST-INFO", "[g]\nfb = f\n", metadata="")
    write(d / "PKG-INFO", "Name: fallback-real\nVersion: 7\n")
    dist(root / "b", "fallback_real-1.dist-info", "[g]\nshadowed = s\n")
    return Case([str(site), str(root / "b")])


@case
def stems_the_wheel_format_cannot_write(root):
    """A '-' in the name or '-'/'_' in the version part: the directory name
    is not `name-version` as a wheel writes it, so only METADATA says what
    ep.dist.name and ep.dist.version are (found by the randomized test)."""
    site = root / "site"
    dist(site, "Epsilon-Pkg-2.0.post1.dist-info", "[g]\neps = e\n",
         metadata="Name: Epsilon-Pkg\nVersion: 2.0.post1\n")
    dist(site, "legacy-1.0_beta.dist-info", "[g]\nleg = l\n",
         metadata="Name: legacy\nVersion: 1.0-beta\n")
    return Case([str(site)])


@case
def no_name_header_with_a_named_stem(root):
    """The stem names it for de-duplication, but ep.dist.name is METADATA's
    Name: None when the header is missing (found by the randomized test)."""
    site = root / "site"
    dist(site, "theta-2.0.egg-info", "[g]\nth = t\n", metadata="Version: 2.0\n",
         metadata_file="PKG-INFO")
    dist(site, "iota-1.0.egg-info", "[g]\nio = i\n", metadata="Summary: none\n",
         metadata_file="PKG-INFO")
    return Case([str(site)])


@case
def metadata_header_rules(root):
    """email.message_from_string: case-insensitive names, first one wins,
    trailing spaces kept (so 'spaced  ' does not shadow 'spaced')."""
    a, b = root / "a", root / "b"
    dist(a, "One.DIST-INFO", "[g]\none = 1\n", metadata="NAME: First\nName: second\nVersion: 1\n")
    dist(a, "Two.DIST-INFO", "[g]\ntwo = 2\n", metadata="Name:   spaced  \nVersion: 2\n")
    dist(b, "first-9.dist-info", "[g]\nshadowed = s\n")
    dist(b, "spaced-1.dist-info", "[g]\nspaced = visible\n")
    return Case([str(a), str(b)])


@case
def missing_name_raises(root):
    """No Name header (here: it follows the blank line that ends the headers):
    Prepared.normalize(None) raises TypeError."""
    return one_dist(root, "Nameless.DIST-INFO", "[g]\nx = y\n", metadata="Version: 1\n\nName: too-late\n",
                    expect=RAISES, names="Nameless.DIST-INFO")


@case
def missing_metadata_raises(root):
    """EGG-INFO with neither METADATA nor PKG-INFO: no name, TypeError."""
    egg = root / "bare-1.0.egg"
    write(egg / "EGG-INFO" / "entry_points.txt", "[g]\nbare = b\n")
    return Case([str(egg)], expect=RAISES, names="EGG-INFO")


@case
def metadata_invalid_utf8_raises(root):
    """Reading METADATA for the name decodes it: invalid UTF-8 raises."""
    return one_dist(root, "Bad.DIST-INFO", "[g]\nx = y\n", metadata=b"Name: caf\xe9\n",
                    expect=RAISES, names="Bad.DIST-INFO/METADATA")


@case
def metadata_unread_when_named_by_stem(root):
    """With a lowercase suffix METADATA is not read for de-duplication, so even
    invalid METADATA does not make entry_points() raise (ep.dist.name would)."""
    return one_dist(root, "unread.dist-info", "[g]\nunread = u\n", metadata=b"Name: \xff\n",
                    compare_dist=False)


@case
def empty_stem_name(root):
    """'-1.0.dist-info' names nothing from its stem: importlib reads METADATA."""
    a, b = root / "a", root / "b"
    dist(a, "-1.0.dist-info", "[g]\nanon = a\n", metadata="Name: anon\nVersion: 1.0\n")
    dist(b, "anon-2.0.dist-info", "[g]\nshadowed = s\n")
    return Case([str(a), str(b)])


@case
def metadata_path_is_a_file(root):
    """'x.dist-info' that is a regular file: no entry points, still shadows."""
    a, b = root / "a", root / "b"
    write(a / "plainfile-1.0.dist-info", "not a directory\n")
    dist(b, "plainfile-2.0.dist-info", "[g]\nshadowed = s\n")
    dist(b, "kept-1.0.dist-info", "[g]\nkept = k\n")
    return Case([str(a), str(b)])


@case
def entry_points_txt_is_a_directory(root):
    """IsADirectoryError is suppressed: no entry points, no error."""
    site = root / "site"
    d = dist(site, "dirfile-1.0.dist-info")
    (d / "entry_points.txt").mkdir()
    dist(site, "fine-1.0.dist-info", "[g]\nfine = f\n")
    return Case([str(site)])


@case
def symlinks(root):
    """Symlinked metadata directories are followed; a dangling one still shadows."""
    real, a, b = root / "real", root / "a", root / "b"
    dist(real, "linked-1.0.dist-info", "[g]\nlinked = l\n")
    a.mkdir()
    (a / "linked-1.0.dist-info").symlink_to(real / "linked-1.0.dist-info")
    (a / "dangling-1.0.dist-info").symlink_to(root / "nowhere")
    dist(b, "dangling-2.0.dist-info", "[g]\nshadowed = s\n")
    return Case([str(a), str(b)])


@case
def symlink_loop_raises(root):
    """ELOOP is an OSError that read_text does not suppress: importlib raises."""
    site = root / "site"
    d = dist(site, "loop-1.0.dist-info")
    (d / "entry_points.txt").symlink_to("entry_points.txt")
    return Case([str(site)], expect=RAISES, names="loop-1.0.dist-info/entry_points.txt")


@case
def unreadable_entry_points(root):
    """PermissionError is suppressed: no entry points, no error."""
    site = root / "site"
    d = dist(site, "locked-1.0.dist-info", "[g]\nlocked = l\n")
    (d / "entry_points.txt").chmod(0)
    dist(site, "open-1.0.dist-info", "[g]\nopen = o\n")
    skip = None
    if os.geteuid() == 0:
        skip = ("running as root: root reads mode-000 files, so PermissionError "
                "cannot be provoked")
    return Case([str(site)], skip=skip)


@case
def unlistable_path(root):
    """A directory that cannot be listed contributes nothing."""
    locked, site = root / "locked", root / "site"
    dist(locked, "inside-1.0.dist-info", "[g]\ninside = i\n")
    locked.chmod(0)
    dist(site, "outside-1.0.dist-info", "[g]\noutside = o\n")
    skip = None
    if os.geteuid() == 0:
        skip = "running as root: root lists mode-000 directories"
    return Case([str(locked), str(site)], skip=skip)


@case
def nonexistent_and_file_paths(root):
    """A missing path and a plain (non-zip) file contribute nothing."""
    site = root / "site"
    dist(site, "real-1.0.dist-info", "[g]\nreal = r\n")
    write(root / "notes.txt", "just a file\n")
    return Case([str(root / "missing"), str(root / "notes.txt"), str(site)])


@case
def empty_string_path_is_cwd(root):
    """'' on the path means the current directory."""
    dist(root, "here-1.0.dist-info", "[g]\nhere = h\n")
    return Case([""], cwd=str(root))


@case
def relative_path(root):
    """Relative paths resolve against the current directory."""
    dist(root / "rel" / "site", "rel-1.0.dist-info", "[g]\nrel = r\n")
    return Case(["rel/site", "./rel/../rel/site"], cwd=str(root))


@case
def repeated_path(root):
    """The same directory twice: every distribution is shadowed by itself."""
    site = root / "site"
    dist(site, "twice-1.0.dist-info", "[g]\ntwice = t\n")
    dist(site, "Upper.DIST-INFO", "[g]\nupper = u\n", metadata="Name: upper\n")
    return Case([str(site), str(site)])


@case
def zip_without_distributions(root):
    """A zip archive whose top level holds no metadata contributes nothing."""
    z = root / "plain.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("lib/nested-1.0.dist-info/entry_points.txt", "[g]\nnested = n\n")
    dist(root / "site", "after-1.0.dist-info", "[g]\nafter = a\n")
    return Case([str(z), str(root / "site")])


@case
def zip_with_distribution(root):
    """A zip archive holding a dist-info: importlib reads it; epload refuses
    with a message naming the archive (its Python layer then uses importlib)."""
    z = root / "dists.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        zf.writestr("zipped-1.0.dist-info/entry_points.txt", "[g]\nzipped = z\n")
    return Case([str(z)], expect=UNSUPPORTED, names="dists.zip")


@case
def zipped_egg(root):
    """A zipped *.egg with EGG-INFO/ at its top level is read by importlib too."""
    z = root / "zegg-1.0-py3.11.egg"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("EGG-INFO/PKG-INFO", "Name: zegg\nVersion: 1.0\n")
        zf.writestr("EGG-INFO/entry_points.txt", "[g]\nzegg = z\n")
    return Case([str(z)], expect=UNSUPPORTED, names="zegg-1.0-py3.11.egg")


@case
def zip_with_comment(root):
    """An archive comment moves the end record: zipfile searches backwards for
    its signature, and so does the probe.  The first archive's comment holds a
    fake signature, which zipfile takes and then rejects (nothing listed); the
    second holds a dist-info."""
    plain, dists = root / "commented.zip", root / "commented-dists.zip"
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("mod.py", "")
        zf.comment = b"PK\x05\x06 looks like an end record but is only a comment"
    with zipfile.ZipFile(dists, "w") as zf:
        # Inside a zip, importlib always names a distribution from METADATA
        # (str() of a zipfile.Path ends in '/', so there is no stem).
        zf.writestr("c-1.0.dist-info/METADATA", "Name: c\nVersion: 1.0\n")
        zf.writestr("c-1.0.dist-info/entry_points.txt", "[g]\nc = c\n")
        zf.comment = b"x" * 1000
    return Case([str(plain), str(dists)], expect=UNSUPPORTED, names="commented-dists.zip")


@case
def corrupt_zip(root):
    """A file with a zip signature but a broken central directory: zipfile
    raises BadZipFile, importlib lists nothing."""
    z = root / "broken.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("broken-1.0.dist-info/entry_points.txt", "[g]\nbroken = b\n")
    data = bytearray(z.read_bytes())
    cd = data.rfind(b"PK\x01\x02")
    data[cd:cd + 4] = b"XXXX"  # bad central-directory magic
    z.write_bytes(bytes(data))
    dist(root / "site", "ok-1.0.dist-info", "[g]\nok = o\n")
    return Case([str(z), str(root / "site")])


@case
def unicode_distribution_names(root):
    """Names are lower-cased with full Unicode rules (str.lower), Final_Sigma
    included: 'ΟΔΟΣ' and 'οδος' normalize alike, and Ñ/ñ too."""
    a, b = root / "a", root / "b"
    dist(a, "\u00d1ame-1.0.dist-info", "[g]\nupper_n = a\n")
    dist(a, "\u039f\u0394\u039f\u03a3-1.0.dist-info", "[g]\nsigma = a\n")
    dist(b, "\u00f1ame-2.0.dist-info", "[g]\nshadowed_n = b\n")
    dist(b, "\u03bf\u03b4\u03bf\u03c2-2.0.dist-info", "[g]\nshadowed_sigma = b\n")
    dist(b, "\u03bf\u03b4\u03bf\u03c3-2.0.dist-info", "[g]\nmedial_sigma_differs = b\n")
    return Case([str(a), str(b)])


@case
def dist_name_is_metadata_name(root):
    """ep.dist.name is METADATA's Name as written, whatever the directory's
    name says: 'Jinja2' in jinja2-3.1.2.dist-info, 'hid' in .hid-1.0.dist-info,
    'real' in alias-1.0.dist-info, a symlink to real-1.0.dist-info."""
    site, real = root / "site", root / "real"
    meta = "Metadata-Version: 2.1\nName: {}\nVersion: {}\n"
    dist(site, "jinja2-3.1.2.dist-info", "[g]\njinja = j\n", metadata=meta.format("Jinja2", "3.1.2"))
    dist(site, ".hid-1.0.dist-info", "[g]\nhid = h\n", metadata=meta.format("hid", "1.0"))
    dist(real, "real-1.0.dist-info", "[g]\nalias = a\n", metadata=meta.format("real", "1.0"))
    (site / "alias-1.0.dist-info").symlink_to(real / "real-1.0.dist-info")
    dist(site, "plain-1.0.dist-info", "[g]\nplain = p\n")
    return Case([str(site)])


@case
def undecodable_metadata_directory_names(root):
    """Metadata directories whose names are not UTF-8 (os.listdir gives them
    surrogate-escaped): their entry points are found, named by METADATA (or
    None without a Name header), in a directory whose name is not UTF-8 either."""
    site = root / os.fsdecode(b"site\xfe")
    dist(site, os.fsdecode(b"caf\xe9-1.0.dist-info"), "[g]\ncafe = c\n",
         metadata="Metadata-Version: 2.1\nName: cafe\nVersion: 1.0\n")
    dist(site, os.fsdecode(b"n\xffn\xc3-2.0.dist-info"), "[g]\nnameless = n\n",
         metadata="Metadata-Version: 2.1\nVersion: 2.0\n")
    dist(site, os.fsdecode(b"quiet\xe9-1.0.dist-info"), metadata="Name: quiet\n")
    return Case([str(site)])


@case
def raw_values_and_sorting(root):
    """Values stay raw; groups sort by code point (uppercase, lowercase, non-ASCII)."""
    site = root / "site"
    body = ("[zeta]\nz = pkg.mod:obj.attr [extra1, extra2]\n"
            "[Alpha]\na = weird value with spaces\n"
            "[\u00fcber]\nu = \u00fcber.mod\n"
            "[alpha]\nb = mod\n")
    dist(site, "vals-1.0.dist-info", body)
    dist(site, "vals2-1.0.dist-info", "[alpha]\nc = second.dist\n[Alpha]\nd = x\n")
    return Case([str(site)])


@case
def egg_info_directory_version_from_pkg_info(root):
    """egg-info directories: name and version come from PKG-INFO."""
    site = root / "site"
    dist(site, "Legacy_Pkg-0.5-py3.11.egg-info", "[g]\nlegacy = l\n",
         metadata="Metadata-Version: 1.1\nName: Legacy-Pkg\nVersion: 0.5\n",
         metadata_file="PKG-INFO")
    return Case([str(site)])


@case
def crlf_metadata(root):
    """METADATA with CRLF endings and a folded header before Name."""
    site = root / "site"
    dist(site, "Crlf.DIST-INFO", "[g]\r\ncrlf = c\r\n",
         metadata="Metadata-Version: 2.1\r\nSummary: folded\r\n  continued\r\nName: crlf\r\n"
                  "Version: 1.0\r\n\r\nbody\r\n")
    return Case([str(site)])
