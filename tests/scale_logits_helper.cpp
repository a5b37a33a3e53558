// scale_logits_helper IN_STEP_FOLDER OUT_CKPT_DIR FACTOR: writes a copy of a checkpoint whose final
// LayerNorm weight and bias (ln_f.weight, ln_f.bias) are multiplied by FACTOR, as a new, valid
// checkpoint (fresh checksums and manifest) in OUT_CKPT_DIR/step_<N>. Since logits = ln_f(x) @ wte^T,
// every logit is multiplied by FACTOR: the same argmax, sharper probabilities, a broken calibration.
// release-gate's end-to-end test uses it (tests/scripts/release_gate.sh) to plant an overconfident
// candidate. Exit 0, or 2 with a message.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mpi.h>

#include "shardtrain/base/error.hpp"
#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/comm/mpi.hpp"

int main(int argc, char** argv) {
  using namespace shardtrain;
  if (argc != 4) {
    std::fprintf(stderr, "usage: scale_logits_helper IN_STEP_FOLDER OUT_CKPT_DIR FACTOR\n");
    return 2;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    const ckpt::CheckpointReader reader(argv[1]);
    const float factor = std::strtof(argv[3], nullptr);
    std::vector<ckpt::TensorSpec> specs;
    std::vector<std::vector<char>> data;
    for (const auto& t : reader.tensors()) {
      specs.push_back(t.spec);
      data.emplace_back(std::size_t(t.spec.bytes()));
      reader.read(t.spec.name, data.back().data());
      if (t.spec.name == "ln_f.weight" || t.spec.name == "ln_f.bias") {
        if (t.spec.dtype != DType::kFloat32) throw UsageError(t.spec.name + " is not float32");
        auto* f = reinterpret_cast<float*>(data.back().data());
        for (std::int64_t i = 0; i < t.spec.numel(); ++i) f[i] *= factor;
      }
    }
    std::vector<ckpt::PieceView> pieces;
    for (std::size_t i = 0; i < specs.size(); ++i) pieces.push_back({specs[i].name, 0, specs[i].numel(), data[i].data()});
    ckpt::CheckpointManifest manifest = reader.manifest();
    manifest.files.clear();
    manifest.extra["edited"] = "ln_f.weight and ln_f.bias x " + std::string(argv[3]) + " (scale_logits_helper)";
    CommOptions options;
    options.name = "scale-logits";
    const auto comm = make_mpi_communicator(MPI_COMM_SELF, options);
    const auto saved = ckpt::save_checkpoint(argv[2], manifest, specs, pieces, *comm);
    std::printf("%s\n", saved.path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scale_logits_helper: %s\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
