// BoundArgs: a primitive's arguments kept across calls must follow each call's
// buffers (re-pointed memory objects), switch descriptors when told another,
// and never be shared by two callers at once.
#include <gtest/gtest.h>

#include "backend/dnnl/dnnl_utils.h"

using namespace llga;

namespace {

using dnnl::memory;

memory::desc vec(int64_t n) { return memory::desc({n}, memory::data_type::f32, memory::format_tag::a); }

// y = relu(x) over n floats, one eltwise primitive.
struct Relu {
  explicit Relu(int64_t n) : md(vec(n)) {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu, md, 0.f, 0.f);
    prim = makePrimitive<dnnl::eltwise_forward>(d, scratch);
  }
  memory::desc md, scratch;
  dnnl::eltwise_forward prim;
};

}  // namespace

TEST(BoundArgs, FollowsEachCallsBuffers) {
  Relu r(4);
  ExecContext ctx;
  BoundArgs args;
  float x1[4] = {-1, 2, -3, 4}, y1[4] = {9, 9, 9, 9};
  float x2[4] = {5, -6, 7, -8}, y2[4] = {9, 9, 9, 9};
  args.bind(DNNL_ARG_SRC, r.md, x1);
  args.bind(DNNL_ARG_DST, r.md, y1);
  args.execute(ctx, r.prim, r.scratch);
  args.bind(DNNL_ARG_SRC, r.md, x2);  // same descriptor, other buffers: the memory objects are re-pointed
  args.bind(DNNL_ARG_DST, r.md, y2);
  args.execute(ctx, r.prim, r.scratch);
  EXPECT_EQ(std::vector<float>(y1, y1 + 4), (std::vector<float>{0, 2, 0, 4}));
  EXPECT_EQ(std::vector<float>(y2, y2 + 4), (std::vector<float>{5, 0, 7, 0}));
  args.bind(DNNL_ARG_SRC, r.md, y1);  // in place on a buffer seen before
  args.bind(DNNL_ARG_DST, r.md, y1);
  args.execute(ctx, r.prim, r.scratch);
  EXPECT_EQ(std::vector<float>(y1, y1 + 4), (std::vector<float>{0, 2, 0, 4}));
}

TEST(BoundArgs, AnotherDescriptorGetsANewMemoryObject) {
  Relu small(2), big(4);
  ExecContext ctx;
  BoundArgs args;
  float x[4] = {-1, 2, -3, 4}, y[4] = {9, 9, 9, 9};
  args.bind(DNNL_ARG_SRC, small.md, x);
  dnnl::memory first = args.bind(DNNL_ARG_DST, small.md, y);
  args.execute(ctx, small.prim, small.scratch);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0, 2, 9, 9}));  // two elements only
  args.bind(DNNL_ARG_SRC, big.md, x);
  dnnl::memory second = args.bind(DNNL_ARG_DST, big.md, y);
  EXPECT_NE(first.get(), second.get());
  EXPECT_EQ(second.get_desc().get_size(), 16u);
  args.execute(ctx, big.prim, big.scratch);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0, 2, 0, 4}));
}

TEST(BoundArgs, UnboundArgumentsAreNotPassedOn) {
  // A call binds only what it uses; an argument bound on an earlier call is
  // not handed to the next primitive (whose scratchpad here is empty).
  Relu r(4);
  ExecContext ctx;
  BoundArgs args;
  float x[4] = {-1, 2, -3, 4}, y[4] = {}, stale[4] = {};
  args.bind(DNNL_ARG_SRC, r.md, x);
  args.bind(DNNL_ARG_DST, r.md, y);
  args.bind(DNNL_ARG_BIAS, r.md, stale);
  args.execute(ctx, r.prim, r.scratch);
  args.bind(DNNL_ARG_SRC, r.md, x);
  args.bind(DNNL_ARG_DST, r.md, y);
  EXPECT_NO_THROW(args.execute(ctx, r.prim, r.scratch));
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0, 2, 0, 4}));
}

TEST(SharedBoundArgs, OneCallerAtATime) {
  SharedBoundArgs shared;
  BoundArgs* first_seen = nullptr;
  {
    SharedBoundArgs::Lease a = shared.lease();
    SharedBoundArgs::Lease b = shared.lease();  // while a is out: a BoundArgs of its own
    EXPECT_NE(&*a, &*b);
    first_seen = &*a;
  }
  SharedBoundArgs::Lease c = shared.lease();  // returned: the shared one again
  EXPECT_EQ(&*c, first_seen);
}
