// entry_point_test.cpp — split_value against importlib's EntryPoint.pattern.
#include "epload/entry_point.hpp"

#include <gtest/gtest.h>

#include <unistd.h>  // unlink

#include <cstdio>   // popen
#include <cstdlib>  // mkstemp
#include <sstream>
#include <string>
#include <vector>

namespace epload {
namespace {

std::string show(std::string_view value) {
  const auto parts = split_value(value);
  if (!parts) return "None";
  std::string s = "module=" + std::string(parts->module) + " attr=" + std::string(parts->attr) +
                  " extras=";
  for (std::size_t i = 0; i < parts->extras.size(); ++i) {
    if (i) s += ",";
    s += std::string(parts->extras[i]);
  }
  return s;
}

TEST(SplitValue, ModuleOnly) { EXPECT_EQ(show("pkg.module"), "module=pkg.module attr= extras="); }

TEST(SplitValue, ModuleAndDottedAttribute) {
  EXPECT_EQ(show("pkg.mod:obj.attr"), "module=pkg.mod attr=obj.attr extras=");
}

TEST(SplitValue, WhitespaceAroundColonAttrAndExtras) {
  EXPECT_EQ(show("pkg.mod  :  obj   [ a , b ]  "), "module=pkg.mod attr=obj extras=a,b");
}

TEST(SplitValue, ExtrasAreWordRunsInsideTheBrackets) {
  EXPECT_EQ(show("m:f [extra-one, two_2;three]"), "module=m attr=f extras=extra,one,two_2,three");
}

TEST(SplitValue, ExtrasTakeTheLastClosingBracketOnTheLine) {
  EXPECT_EQ(show("m [a] [b]"), "module=m attr= extras=a,b");
}

TEST(SplitValue, DollarMatchesBeforeAFinalNewline) {
  EXPECT_EQ(show("m:f\n"), "module=m attr=f extras=");
  EXPECT_EQ(show("m:f [x]\n"), "module=m attr=f extras=x");
  EXPECT_EQ(show("m:f\n\nx"), "None");
}

TEST(SplitValue, ExtrasCannotSpanLines) {
  EXPECT_EQ(show("m [a\nb]"), "None");
}

TEST(SplitValue, NoMatchWherePythonFindsNone) {
  EXPECT_EQ(show(""), "None");
  EXPECT_EQ(show(":attr"), "None");
  EXPECT_EQ(show("mod:"), "None");
  EXPECT_EQ(show("mod x"), "None");
  EXPECT_EQ(show("mod:attr junk"), "None");
  EXPECT_EQ(show("mod [unclosed"), "None");
}

TEST(SplitValue, ViewsPointIntoTheValue) {
  const std::string v = "a.b:c [x]";
  const auto parts = split_value(v);
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->module.data(), v.data());
  EXPECT_EQ(parts->attr.data(), v.data() + 4);
  EXPECT_EQ(parts->extras.at(0).data(), v.data() + 7);
}

TEST(SplitValue, NonAsciiLettersAreWordCharactersButUnicodeSpacesAreNot) {
  EXPECT_EQ(show("p\xc3\xa4" "ck:f\xc3\xbcn"), "module=p\xc3\xa4" "ck attr=f\xc3\xbcn extras=");
  EXPECT_EQ(show("m\xc2\xa0:f"), "module=m attr=f extras=");  // U+00A0 is \s
}

TEST(SplitValue, MatchesImportlibOnSamples) {
  const std::vector<std::string> values = {
      "pkg", "pkg.mod", "pkg.mod:attr", "pkg.mod:attr.sub", "pkg.mod:attr [e1, e2]",
      "pkg.mod:attr[e1]", "pkg.mod [e1]", "pkg . mod", "pkg:attr:more", "a.b.c:d.e.f [x-y,z]",
      "mod\t:\tattr\t[x]\t", "m:f\n", "m:f\n\n", "m [a] b]", "m [a] b", "[x]", "9mod:_attr",
      "m: a", "m :a", "m:a ]", "m:a []", "m:a [ ]", "..:..", "m:a [é, ü]", "mod.é:fün",
      "m:a\u3000[x]", "m:a [x]\u3000", "m:a [\n]", "m [x]\n",
  };
  char path[] = "/tmp/epload-ep-test-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  FILE* f = ::fdopen(fd, "wb");
  for (const auto& v : values) {
    std::fwrite(v.data(), 1, v.size(), f);
    std::fputc(0, f);
  }
  std::fclose(f);
  const std::string code =
      "import sys, importlib.metadata as md\n"
      "for v in open(sys.argv[1], 'rb').read().decode().split('\\0')[:-1]:\n"
      "    m = md.EntryPoint.pattern.match(v)\n"
      "    if not m: print('None'); continue\n"
      "    ep = md.EntryPoint(name='n', value=v, group='g')\n"
      "    print(('module=' + ep.module + ' attr=' + (ep.attr or '') + ' extras=' + ','.join(ep.extras)).encode().hex())\n";
  const std::string cmd = std::string(EPLOAD_TEST_PYTHON) + " -I -S -c \"$EPLOAD_EP_CODE\" " + path;
  ::setenv("EPLOAD_EP_CODE", code.c_str(), 1);
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0);
  ::unlink(path);
  std::istringstream lines(out);
  for (const auto& v : values) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    std::string want = line;
    if (line != "None") {
      want.clear();
      for (std::size_t i = 0; i + 1 < line.size(); i += 2) {
        want.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
      }
    }
    EXPECT_EQ(show(v), want) << ::testing::PrintToString(v);
  }
}

}  // namespace
}  // namespace epload
