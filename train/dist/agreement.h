// Ranks agree before they train together. Each rank describes what must be the same on every
// rank of a data-parallel run (the configuration but for per-rank items, the model's tensors,
// the job's data and task, the resumed step) as named items; require_same_identity() compares
// them across ranks before the first collective of the training run. Ranks that disagree would
// otherwise hang (one stops earlier), corrupt MPI's buffers (tensors of other sizes in one sum)
// or silently train a model that none of the commands asked for.
//
//   RunIdentity id = configuration_identity(toml);       // "--layers" = "2", ...
//   id.push_back({"tensor wte.weight", "f32 (65, 32)"});
//   require_same_identity(Communicator::world(), id);   // throws on every rank alike
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attograd/train/dist/communicator.h"

namespace ag {

// What require_same_identity() throws, on every rank alike: each rank can end by itself, with
// no need for Communicator::abort.
class RanksDisagree : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Named values, in a fixed order: ("--layers", "2"), ("tensor h.0.ln.weight", "f32 (32)").
using RunIdentity = std::vector<std::pair<std::string, std::string>>;

// The shared flags of the training programs that only place or observe one rank's run: they
// may differ between ranks.
inline const std::vector<std::string> kPerRankFlags = {"threads", "save",   "log",    "plot",        "quiet",
                                                        "overwrite", "config", "resume", "write-config"};

// The `key=value` lines of a TOML configuration (comments and blank lines skipped) as items
// ("--key", value), without the keys listed in `per_rank`.
RunIdentity configuration_identity(const std::string& toml, const std::vector<std::string>& per_rank = kPerRankFlags);

// Every rank calls it with its own identity, before any other collective of the run. It
// all-gathers a 64-bit hash of the identity and returns when every rank's is the same; otherwise
// it gathers the identities themselves and throws RanksDisagree on every rank with the
// same message, naming the first differing items with rank 0's value and the other rank's.
void require_same_identity(Communicator& comm, const RunIdentity& identity);

}  // namespace ag
