"""The crafted trees of the entry_points.txt parsing rules (registered in
treekit.CASES on import; difftrees.py holds them all)."""

from treekit import RAISES, Case, case, dist, one_dist


# ---- entry_points.txt parsing ------------------------------------------------

@case
def basic(root):
    """Two groups, two distributions: the plain, common case."""
    site = root / "site"
    dist(site, "alpha-1.0.dist-info", "[console_scripts]\nalpha = alpha.cli:main\n\n"
         "[epload.test]\nfirst = alpha.plugin:First\n")
    dist(site, "beta-2.3.dist-info", "[epload.test]\nsecond = beta:Second [fast, small]\n")
    return Case([str(site)])


@case
def splitlines_boundaries(root):
    """str.splitlines: \\n \\r \\r\\n \\v \\f \\x1c \\x1d \\x1e \\x85 U+2028 U+2029."""
    seps = ["\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
    body = "[g]" + "".join(f"{sep}k{i} = v{i}" for i, sep in enumerate(seps)) + "\n"
    return one_dist(root, "lines-1.0.dist-info", body)


@case
def unicode_whitespace_strip(root):
    """str.strip removes Python's whole whitespace set; \\x1f strips but does not split."""
    ws = "\t \x1f\xa0\u1680\u2000\u2005\u200a\u202f\u205f\u3000"
    body = (f"{ws}[g]{ws}\n"
            f"{ws}a{ws}={ws}mod.a:obj{ws}\n"
            "b\x1f=\x1fmod.b\n"
            "c = keep\u200binner\u200b\n")  # U+200B is not whitespace
    return one_dist(root, "spaces-1.0.dist-info", body)


@case
def comments(root):
    """Only a leading '#' (after strip) comments a line; ';' and inline '#' are data."""
    body = ("# leading comment\n[g]\n# comment\n   # indented comment\n"
            ";semi = 1\nhash = value # not a comment\n#x = hidden\n")
    return one_dist(root, "comments-1.0.dist-info", body)


@case
def section_names(root):
    """'[...]' after strip opens a section named line.strip('[]'): inner spaces kept,
    every outer bracket removed, names case-sensitive, '[]' is the empty group."""
    body = ("[ spaced group ]\na = 1\n"
            "[[double]]\nb = 2\n"
            "[a]b]\nc = 3\n"
            "[]\nd = 4\n"
            "[Group]\ne = 5\n[group]\nf = 6\n"
            "  [  padded ]  \ng = 7\n"
            "[\u00e9t\u00e9]\nh = 8\n")
    return one_dist(root, "sections-1.0.dist-info", body)


@case
def lines_before_first_section(root):
    """Lines before the first section are dropped without parsing (no '=' needed)."""
    body = "stray line without equals\nx = y\n\n[g]\nk = v\n"
    return one_dist(root, "early-1.0.dist-info", body)


@case
def first_equals_splits(root):
    """Split on the first '=' only; empty names and values are kept."""
    body = "[g]\na = b = c\n= novalue_name\nempty =\nx==y\n"
    return one_dist(root, "equals-1.0.dist-info", body)


@case
def duplicates_kept(root):
    """Duplicate names and repeated sections are all kept, in file order."""
    body = "[g]\nsame = one\nsame = two\n[h]\nz = 1\n[g]\nsame = three\n"
    return one_dist(root, "dupes-1.0.dist-info", body)


@case
def missing_equals(root):
    """A non-empty line without '=' inside a section: importlib raises."""
    return one_dist(root, "noeq-1.0.dist-info", "[g]\nok = 1\nthis line has no equals sign\n",
                    expect=RAISES, names="noeq-1.0.dist-info/entry_points.txt:3")


@case
def section_with_trailing_comment(root):
    """'[g] # c' does not end with ']': it is a pair line without '=' and raises."""
    return one_dist(root, "trail-1.0.dist-info", "[g]\na = 1\n[h] # comment\n",
                    expect=RAISES, names="trail-1.0.dist-info/entry_points.txt:3")


@case
def invalid_utf8(root):
    """Bytes that are not UTF-8 make read_text raise UnicodeDecodeError."""
    return one_dist(root, "latin-1.0.dist-info", "[g]\nname = caf\xe9\n".encode("latin-1"),
                    expect=RAISES, names="latin-1.0.dist-info/entry_points.txt")


@case
def utf8_surrogate_and_overlong(root):
    """Python's strict codec refuses encoded surrogates (ED A0 80) and overlongs."""
    site = root / "site"
    dist(site, "surr-1.0.dist-info", b"[g]\nname = \xed\xa0\x80\n")
    dist(site, "overlong-1.0.dist-info", b"[g]\nname = \xc0\xaf\n")
    return Case([str(site)], expect=RAISES, names="/entry_points.txt")


@case
def byte_order_mark(root):
    """The 'utf-8' codec keeps a BOM, so '\\ufeff[g]' is not a section header."""
    return one_dist(root, "bom-1.0.dist-info", "\ufeff[g]\nhidden = 1\n[h]\nseen = 2\n")


@case
def nul_and_controls_in_values(root):
    """Other control characters are ordinary data."""
    return one_dist(root, "ctl-1.0.dist-info", "[g]\nnul = a\x00b\nbell = \x07x\n")
