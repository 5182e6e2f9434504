// What passes must not move, merge or delete.
#pragma once

#include <functional>
#include <set>
#include <vector>

#include "ir/ir.h"

namespace llga {

// In-place ops (aten::relu_), list mutation, exceptions, prints, attribute
// writes, randomness; and control flow containing any of those.
bool hasSideEffects(const Node& n);
// Mutable container types (lists and dicts can be changed in place).
bool isMutableType(const Type& t);
// Some node that mutates (has side effects) reads this value.
bool hasMutatingUse(const Value& v);
// Ops whose output may share memory with an input: views (view, slice,
// transpose, ...), aliases (detach, contiguous, to), containers holding it,
// and control flow passing it through.
bool isAliasing(const Node& n);
// Ops that write into the memory of their first input: in-place aten ops
// (aten::add_, copy_, index_put_, ...), and fusion groups or control flow
// containing one (conservatively: every input of such a node).
bool writesInput(const Node& n, size_t input);
// The first use, of v or of anything that may share memory with it, for
// which `hit` holds; null if none. Follows views and aliases forward (and an
// in-place op's result, which is its input), into nested blocks (block
// parameters, where they read it directly) and out of them (a nested block
// returning an alias makes its node's results aliases: all of them,
// conservatively).
const Use* findAliasUse(const Value& v, const std::function<bool(const Use&)>& hit);
// A node that may write into v's memory, directly or through a view or alias
// of it, or null.
const Node* writerOf(const Value& v);
// The value whose memory v is a view or alias of, followed back through view
// and alias ops of its block (not through control flow); v itself if none.
// An element taken out of a list or tuple built in the block is followed to
// the value put there; where that is not known (an index computed at run
// time, a dict) the walk stops at the container.
const Value* aliasRoot(const Value& v);
// Adds every value whose memory v may be to `roots`: back through views
// (all their operands that can hold a tensor: a container's every element,
// and a view's other tensor operands too, more than needed, never less) and
// through in-place ops' results (x.add_(y) returns x), to values no such op
// made. Numbers and lists of them (a view's sizes) have no memory here.
void memoryRoots(const Value& v, std::set<const Value*>& roots);
// Whether k writes in place into memory with one of these roots.
bool writesInto(const Node& k, const std::set<const Value*>& roots);
// A node strictly between `after` and `before` in their block that may
// write into v's memory (a root in common with what it writes in place);
// `before` itself when it does not follow `after` in after's block (not
// known: as if written); null if none.
const Node* writeBetween(const Value& v, const Node* after, const Node* before);
// Whether the graph returns v or a view or alias of it.
bool reachesGraphOutput(const Value& v);
// For each graph input: a node that may write into its memory, directly or
// through a view or alias of it, or null. What the caller hands over for
// such an input must be writeable and must not have overlapping elements.
std::vector<const Node*> inputWriters(const Graph& g);

}  // namespace llga
