// The op table is the single definition of every op: each row must have an
// interpreter kernel and an inference function, and its attribute specs must
// be well-formed. A new op without either fails here.
#include "interp/kernel.h"
#include "ir/infer/infer.h"
#include "ir/op.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln {
namespace {

TEST(OpTable, EveryOpHasAnInterpreterKernel) {
  for (const OpSchema &s : allOpSchemas())
    EXPECT_NE(kernelTable().find(s.kind), nullptr) << s.name << " has no kernel";
}

TEST(OpTable, EveryOpHasAnInferenceFunction) {
  for (const OpSchema &s : allOpSchemas())
    EXPECT_NE(inferTable().find(s.kind), nullptr) << s.name << " has no inference function";
}

TEST(OpTable, NamesAreUniqueAndLookUpToThemselves) {
  std::set<std::string_view> seen;
  for (const OpSchema &s : allOpSchemas()) {
    EXPECT_TRUE(seen.insert(s.name).second) << s.name << " defined twice";
    ASSERT_TRUE(opFromName(s.name).has_value());
    EXPECT_EQ(*opFromName(s.name), s.kind);
  }
  EXPECT_FALSE(opFromName("NoSuchOp").has_value());
}

TEST(OpTable, ArityAndAttributeSpecsAreConsistent) {
  for (const OpSchema &s : allOpSchemas()) {
    EXPECT_GE(s.minInputs, 0) << s.name;
    EXPECT_TRUE(s.maxInputs < 0 || s.maxInputs >= s.minInputs) << s.name;
    EXPECT_TRUE(s.maxOutputs < 0 || s.maxOutputs >= s.minOutputs) << s.name;
    std::set<std::string> names;
    for (const AttrSpec &a : s.attrs) {
      EXPECT_TRUE(names.insert(a.name).second) << s.name << "." << a.name << " declared twice";
      EXPECT_FALSE(a.required && a.defaultText) << s.name << "." << a.name
                                                << " is required yet has a default";
      if (a.defaultText)
        EXPECT_TRUE(a.kind == AttrKind::Int || a.kind == AttrKind::Float ||
                    a.kind == AttrKind::String)
            << s.name << "." << a.name << ": defaults are for scalar attributes";
    }
  }
}

} // namespace
} // namespace kiln
