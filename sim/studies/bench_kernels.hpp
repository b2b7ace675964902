// wafersim bench kernels: the host GEMV tile kernel (models::gemv_tile) on
// the tile shapes a placed model gives its cores, streamed from memory as a
// functional run streams them, for each kernel the host can run.
#pragma once

namespace wafersim::sim {

int bench_kernels(bool json);

}  // namespace wafersim::sim
