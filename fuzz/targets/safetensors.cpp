// Fuzz target: a safetensors file (its 8-byte header length, the JSON header, the data offsets),
// through ckpt::read_safetensors; then every tensor's values, whose dtype the reader has checked.
// A tensor read back must hold exactly product(shape) x element size bytes: a shape whose product
// wraps around 2^64 must be refused, never read as a tensor of another size.
#include <cstdio>
#include <cstdlib>

#include "fuzz_target.hpp"
#include "shardtrain/ckpt/safetensors.hpp"

SHARDTRAIN_FUZZ_TARGET(safetensors) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("model.safetensors", fuzz::as_text(data, size));
  ckpt::SafetensorsFile file;
  fuzz::expect_reader_contract(path, [&] { file = ckpt::read_safetensors(path); });
  for (const ckpt::SafetensorsTensor& tensor : file.tensors) {
    const unsigned __int128 element = tensor.dtype == "F32" ? 4 : tensor.dtype == "BF16" || tensor.dtype == "F16" ? 2 : 0;
    unsigned __int128 bytes = element;
    for (std::int64_t d : tensor.shape) bytes = d < 0 || bytes > (unsigned __int128)(1) << 64 ? bytes : bytes * std::uint64_t(d);
    if (element != 0 && bytes != tensor.data.size()) {
      std::fprintf(stderr, "fuzz: FINDING: tensor '%s' read with %zu bytes for its shape\n", tensor.name.c_str(),
                   tensor.data.size());
      std::abort();
    }
    fuzz::expect_reader_contract(tensor.dtype, [&] { (void)ckpt::safetensors_floats(tensor); });
  }
}
