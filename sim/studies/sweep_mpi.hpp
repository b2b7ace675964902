// A sweep spread over MPI ranks: started by mpirun or srun, every rank runs
// points (up to its --jobs at once) and rank 0 hands them out one at a time
// as ranks ask for work (so long points do not leave ranks idle), gathers the
// records as they finish, journals them and writes every output: one JSON,
// CSV or table for the whole grid whatever the launcher and rank count.
//
// Only rank 0's main thread talks to the others, with point-to-point
// messages on MPI_COMM_WORLD: a rank asks (kRequest), rank 0 answers with a
// point's index or -1 (kAssign), the rank sends the record back (kResult) and,
// when told there is no more, says it is done (kFinished) and waits for
// rank 0's goodbye (kBye). On a signal rank 0 stops handing out points and
// tells the ranks still working to stop theirs (kCancel).
#pragma once

#include <functional>
#include <vector>

#include "sim/studies/sweep.hpp"

namespace wafersim::sim {

// True when an MPI launcher started this process (Open MPI's mpirun, or a
// PMI/PMIx launcher such as srun): the environment names a rank.
bool launched_by_mpi();
// False when this wafersim was built without MPI (then a sweep under mpirun
// is refused rather than run once per rank).
bool built_with_mpi();

// MPI, initialised for the life of the object (MPI_THREAD_FUNNELED: only the
// thread that made it calls MPI). Throws std::runtime_error when built without MPI.
class MpiWorld {
 public:
  MpiWorld();
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank 0's `go` on every rank (a broadcast): whether the sweep goes on
  // after what only rank 0 checked (scenarios, journal).
  bool agree(bool go) const;

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Rank 0: runs the points of `grid` whose indices are in `todo` over every
// rank, itself included, calling `finished` (on this thread) with each record
// as it arrives. Other ranks: run what rank 0 hands them and return when it
// says there is no more. options.cancel stops every rank's points.
void run_sweep_mpi(const MpiWorld& world, const std::vector<SweepPoint>& grid,
                   const std::vector<int>& todo, const SweepOptions& options,
                   const std::function<void(const SweepRecord&)>& finished);

}  // namespace wafersim::sim
