#include "runtime/layout_codec.h"

#include <atomic>

namespace llga {
namespace {
std::atomic<const LayoutCodec*> g_codec{nullptr};
}  // namespace

void setLayoutCodec(const LayoutCodec* codec) { g_codec.store(codec); }
const LayoutCodec* layoutCodec() { return g_codec.load(); }

}  // namespace llga
