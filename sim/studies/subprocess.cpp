#include "sim/studies/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <mutex>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace wafersim::sim {

namespace {

// Both ends close on exec, so a child started by another thread at the same
// moment does not keep this child's pipe open (which would hang the reader).
void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
}

class SpawnActions {
 public:
  SpawnActions() { ::posix_spawn_file_actions_init(&a_); }
  ~SpawnActions() { ::posix_spawn_file_actions_destroy(&a_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &a_; }

 private:
  posix_spawn_file_actions_t a_;
};

}  // namespace

ProcessOutput run_process(const std::vector<std::string>& argv, const std::atomic<bool>* cancel) {
  if (argv.empty()) throw std::invalid_argument("run_process: no program");
  int out_pipe[2], err_pipe[2];
  make_pipe(out_pipe);
  try {
    make_pipe(err_pipe);
  } catch (...) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw;
  }
  SpawnActions actions;
  // dup2 clears close-on-exec on the duplicate: the child keeps only these.
  ::posix_spawn_file_actions_adddup2(actions.get(), out_pipe[1], STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(actions.get(), err_pipe[1], STDERR_FILENO);
  ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], actions.get(), nullptr, args.data(), environ);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error("cannot start " + argv.front() + ": " + std::strerror(rc));
  }

  ProcessOutput o;
  std::array<pollfd, 2> fds{pollfd{out_pipe[0], POLLIN, 0}, pollfd{err_pipe[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&o.out, &o.err};
  std::array<char, 65536> buf{};
  int open_fds = 2;
  using Clock = std::chrono::steady_clock;
  Clock::time_point terminated_at{};
  bool killed = false;
  while (open_fds > 0) {
    if (cancel && cancel->load() && !o.cancelled) {
      o.cancelled = true;
      ::kill(pid, SIGTERM);
      terminated_at = Clock::now();
    }
    if (o.cancelled && !killed && Clock::now() - terminated_at > std::chrono::seconds(5)) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    const int ready = ::poll(fds.data(), fds.size(), cancel ? 100 : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

std::vector<ProcessOutput> run_processes(const std::vector<std::vector<std::string>>& argvs,
                                         int jobs) {
  std::vector<ProcessOutput> out(argvs.size());
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    for (std::size_t i = next++; i < argvs.size(); i = next++) {
      try {
        out[i] = run_process(argvs[i]);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = argvs.size();
      }
    }
  };
  std::vector<std::thread> pool;
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(argvs.size())));
  for (int j = 1; j < n; ++j) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

std::string first_error_line(const std::string& err) {
  std::istringstream in(err);
  std::string line, first;
  while (std::getline(in, line)) {
    if (line.find("error") != std::string::npos) return line;
    if (first.empty() && !line.empty() && line.front() != '\r') first = line;
  }
  return first;
}

}  // namespace wafersim::sim
