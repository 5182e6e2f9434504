// The IR's mutation API keeps its invariants; the verifier notices when they break.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/effects.h"
#include "ir/ir.h"
#include "ir/verifier.h"
#include "passes/pass.h"

using namespace llga;

namespace {

const char* kChain = R"IR(graph(%x : Float(2, 3)):
  %a : Tensor = aten::relu(%x)
  %b : Tensor = aten::sigmoid(%a)
  %c : Tensor = aten::add(%a, %b, %a)
  return (%c)
)IR";

Node* findKind(Graph& g, const char* kind) {
  for (Node* n : g.nodes())
    if (n->kind().toQualString() == kind) return n;
  return nullptr;
}

// A pass that breaks the IR the way Ir.VerifierCatchesUseBeforeDefinition
// does, registered in this test binary only: the pass manager must stop
// after it with the verifier's complaint and every record so far.
class BreakOrderForTest final : public Pass {
 public:
  std::string_view name() const override { return "test-break-order"; }
  std::string_view description() const override { return "moves aten::sigmoid before its input's definition (tests only)"; }
  bool run(Graph& g) override {
    findKind(g, "aten::sigmoid")->moveBefore(findKind(g, "aten::relu"));
    return true;
  }
};
LLGA_REGISTER_PASS(BreakOrderForTest);

}  // namespace

TEST(Ir, UsesTrackInputs) {
  auto g = parseGraph(kChain);
  Value* a = g->findValue("a");
  ASSERT_NE(a, nullptr);
  // %a feeds sigmoid (0) and add (0 and 2)
  EXPECT_EQ(a->uses().size(), 3u);
  Node* add = findKind(*g, "aten::add");
  add->removeInput(0);  // add(%b, %a): %a's use moves from offset 2 to 1
  EXPECT_TRUE(verify(*g).empty());
  bool found = false;
  for (const Use& u : a->uses()) found |= (u.user == add && u.offset == 1);
  EXPECT_TRUE(found);
  add->insertInput(0, g->findValue("x"));
  EXPECT_TRUE(verify(*g).empty());
  EXPECT_EQ(add->input(2), a);
}

TEST(Ir, ReplaceAllUsesWith) {
  auto g = parseGraph(kChain);
  Value* a = g->findValue("a");
  Value* x = g->findValue("x");
  a->replaceAllUsesWith(x);
  EXPECT_FALSE(a->hasUses());
  EXPECT_EQ(x->uses().size(), 4u);
  a->node()->destroy();
  EXPECT_TRUE(verify(*g).empty());
  EXPECT_EQ(g->findValue("a"), nullptr);  // the name is free again
  EXPECT_NE(g->toString().find("aten::sigmoid(%x)"), std::string::npos);
}

TEST(Ir, DestroyWithUsesThrows) {
  auto g = parseGraph(kChain);
  EXPECT_THROW(g->findValue("a")->node()->destroy(), std::logic_error);
  EXPECT_TRUE(verify(*g).empty());
}

TEST(Ir, TopologicalOrderSurvivesManyInsertions) {
  auto g = parseGraph(kChain);
  Node* relu = findKind(*g, "aten::relu");
  Node* sig = findKind(*g, "aten::sigmoid");
  // Always inserting right after relu halves the gap each time: forces renumbering.
  std::vector<Node*> inserted;
  for (int i = 0; i < 200; ++i) {
    Node* n = g->create(Symbol::fromQualString("aten::neg"), {g->findValue("x")}, 1);
    n->insertAfter(relu);
    inserted.push_back(n);
  }
  EXPECT_TRUE(verify(*g).empty());
  for (size_t i = 1; i < inserted.size(); ++i) EXPECT_TRUE(inserted[i]->isBefore(inserted[i - 1]));
  EXPECT_TRUE(relu->isBefore(inserted.back()));
  EXPECT_TRUE(inserted.front()->isBefore(sig));
}

TEST(Ir, VerifierCatchesUseBeforeDefinition) {
  auto g = parseGraph(kChain);
  Node* sig = findKind(*g, "aten::sigmoid");
  Node* relu = findKind(*g, "aten::relu");
  sig->moveBefore(relu);  // sigmoid(%a) now precedes %a's definition
  auto errors = verify(*g);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("not defined before its use"), std::string::npos) << errors[0];
  EXPECT_THROW(verifyOrThrow(*g), VerifyError);
}

TEST(Ir, PassManagerStopsAtAPassThatBreaksTheGraph) {
  auto g = parseGraph(kChain);
  std::vector<std::string> seen;
  PassManagerOptions options;
  options.after_pass = [&](const PassRecord& r) { seen.push_back(r.name); };
  try {
    PassManager("dce,test-break-order,dce", options).run(*g);
    FAIL() << "no PassError";
  } catch (const PassError& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'test-break-order' left an invalid graph: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not defined before its use"), std::string::npos) << e.what();
    ASSERT_EQ(e.records.size(), 2u);  // the passes up to and including the one that broke it
    EXPECT_EQ(e.records[1].name, "test-break-order");
    EXPECT_FALSE(e.records[1].verify_errors.empty());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"dce", "test-break-order"}));  // the third never ran
}

TEST(Ir, CopyIsDeepAndPrintsTheSame) {
  auto g = parseGraph(kChain);
  auto c = g->copy();
  EXPECT_EQ(g->toString(), c->toString());
  c->findValue("b")->setDebugName("renamed");
  EXPECT_NE(g->toString(), c->toString());
  EXPECT_EQ(g->findValue("renamed"), nullptr);
  EXPECT_TRUE(verify(*c).empty());
}

TEST(Ir, NamesAreUnique) {
  auto g = parseGraph(kChain);
  EXPECT_THROW(g->findValue("b")->setDebugName("a"), std::invalid_argument);
  EXPECT_THROW(g->findValue("b")->setDebugName("bad name"), std::invalid_argument);
  // New values get numeric names that do not collide with parsed ones.
  Node* n = g->create(Symbol::fromQualString("aten::neg"), {g->findValue("x")}, 1);
  g->insertNode(n);
  EXPECT_EQ(g->findValue(n->output()->debugName()), n->output());
  EXPECT_TRUE(verify(*g).empty());
}

TEST(Ir, InsertConstantAndBlocks) {
  auto g = parseGraph(R"IR(graph(%c : bool, %x : Tensor):
  %y : Tensor = prim::If(%c)
    block0():
      %r : Tensor = aten::relu(%x)
      -> (%r)
    block1():
      -> (%x)
  return (%y)
)IR");
  g->setInsertPoint(g->nodes().begin().operator*());
  Value* k = g->insertConstant(AttrValue(int64_t{7}), Type::Int());
  EXPECT_EQ(k->node()->next()->kind(), prim::If);
  EXPECT_TRUE(verify(*g).empty());
  Node* ifn = k->node()->next();
  ASSERT_EQ(ifn->blocks().size(), 2u);
  EXPECT_EQ(ifn->blocks()[0]->outputs()[0]->debugName(), "r");
  // Destroying the If takes its blocks (and %r) with it.
  ifn->output()->replaceAllUsesWith(g->findValue("x"));
  ifn->destroy();
  EXPECT_EQ(g->findValue("r"), nullptr);
  EXPECT_TRUE(verify(*g).empty());
}

// aliasRoot follows an element taken out of a list or tuple to the value put
// there, not to the container's first element (which let passes take a
// write into %b for none of theirs), and stops at the container where the
// element is not known.
TEST(Ir, AliasRootFollowsTheElementTakenOutOfAContainer) {
  auto g = parseGraph(R"IR(graph(%a : Float(2, 4), %b : Float(2, 4), %i : int):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %l : Tensor[] = prim::ListConstruct(%a, %b)
  %x : Tensor, %y : Tensor = prim::ListUnpack(%l)
  %z : Tensor = aten::__getitem__(%l, %one)
  %w : Tensor = aten::__getitem__(%l, %i)
  %s : Tensor = aten::slice(%y, %one, %zero, %two, %one)
  %t : (Tensor, Tensor) = prim::TupleConstruct(%a, %b)
  %p : Tensor, %q : Tensor = prim::TupleUnpack(%t)
  %parts : Tensor[] = aten::split(%b, %two, %one)
  %h : Tensor, %k : Tensor = prim::ListUnpack(%parts)
  return (%x, %y, %z, %w, %s, %p, %q, %k)
)IR");
  auto root = [&](const char* v) { return aliasRoot(*g->findValue(v))->debugName(); };
  EXPECT_EQ(root("x"), "a");
  EXPECT_EQ(root("y"), "b");
  EXPECT_EQ(root("z"), "b");
  EXPECT_EQ(root("w"), "l");  // an index known only at run time: the list
  EXPECT_EQ(root("s"), "b");  // a view of an element
  EXPECT_EQ(root("p"), "a");
  EXPECT_EQ(root("q"), "b");
  EXPECT_EQ(root("k"), "b");  // a piece of a split: the split tensor
  EXPECT_EQ(root("l"), "l");  // a container is not its first element
}
