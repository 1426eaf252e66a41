// A PostgreSQL server of the test's own (Debian's postgresql-15): initdb in the test's folder, the
// postmaster on 127.0.0.1 and a free port, which the test can stop (SIGSTOP), kill (SIGKILL) and
// start again, backends included. Run as the postgres user when the test runs as root:
// PostgreSQL refuses to run as root.
#pragma once

#include <gio/gio.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mqtt_broker.h"               // free_port
#include "pipelines/script_support.h"  // spawn

namespace cudanms::testing {

class PostgresServer {
 public:
  // Debian's server binaries; "" where postgresql-15 is not installed.
  static std::string bin_dir() {
    const char *dir = "/usr/lib/postgresql/15/bin";
    return g_file_test((std::string(dir) + "/postgres").c_str(), G_FILE_TEST_IS_EXECUTABLE) ? dir
                                                                                            : "";
  }

  explicit PostgresServer(const std::string &folder)
      : folder_(folder), data_(folder + "/postgres"), port_(free_port()) {}
  ~PostgresServer() { kill(); }

  // initdb the first time, then the postmaster; true once it answers (20 s at most).
  bool start(std::string *why) {
    if (!initialised_) {
      g_mkdir_with_parents(data_.c_str(), 0700);
      chmod(folder_.c_str(), 0755);  // the postgres user passes through
      if (as_postgres() && chown(data_.c_str(), user_->pw_uid, user_->pw_gid) != 0) {
        *why = "cannot give " + data_ + " to the postgres user";
        return false;
      }
      if (!run_sync({bin_dir() + "/initdb", "-D", data_, "-U", "cudanms", "-A", "trust",
                     "--no-sync", "--no-locale", "-E", "UTF8"},
                    why))
        return false;
      initialised_ = true;
    }
    const std::vector<std::string> argv = {bin_dir() + "/postgres",      "-D", data_,      "-p",
                                           std::to_string(port_),        "-k", data_,      "-c",
                                           "listen_addresses=127.0.0.1", "-c", "fsync=off"};
    process_ = spawn(as_user(argv), folder_ + "/postgres.out", folder_ + "/postgres.log");
    if (!process_) {
      *why = "postgres did not start";
      return false;
    }
    pid_ = std::atoi(g_subprocess_get_identifier(process_));
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) +
                                 " user=cudanms dbname=postgres connect_timeout=2";
    for (int i = 0; i < 200; i++) {
      if (PQping(conninfo.c_str()) == PQPING_OK) return true;
      g_usleep(100000);
    }
    *why = "the server did not answer within 20 s (log: " + folder_ + "/postgres.log)";
    return false;
  }
  // postgresql://cudanms@127.0.0.1:PORT/postgres
  std::string uri() const {
    return "postgresql://cudanms@127.0.0.1:" + std::to_string(port_) + "/postgres";
  }
  // SIGKILL to the postmaster and its backends: the host it stands for is gone.
  void kill() {
    if (!process_) return;
    signal_all(SIGCONT);
    signal_all(SIGKILL);
    g_subprocess_wait(process_, nullptr, nullptr);
    g_clear_object(&process_);
    // Its backends are gone with it; give the kernel a moment to free the port.
    g_usleep(100000);
  }
  // The whole server frozen and thawed: the postmaster and each backend (a backend is a
  // process group of its own, so a signal to the postmaster's group does not reach it).
  void pause() { signal_all(SIGSTOP); }
  void resume() { signal_all(SIGCONT); }

 private:
  void signal_all(int number) {
    std::vector<int> pids = {pid_};
    GDir *proc = g_dir_open("/proc", 0, nullptr);
    while (const gchar *name = proc ? g_dir_read_name(proc) : nullptr) {
      gchar *stat = nullptr;
      if (!g_ascii_isdigit(name[0]) ||
          !g_file_get_contents((std::string("/proc/") + name + "/stat").c_str(), &stat, nullptr,
                               nullptr))
        continue;
      const char *after = strrchr(stat, ')');  // "pid (comm) state ppid ..."
      int parent = 0;
      if (after && sscanf(after + 1, " %*c %d", &parent) == 1 && parent == pid_)
        pids.push_back(std::atoi(name));
      g_free(stat);
    }
    if (proc) g_dir_close(proc);
    for (int pid : pids) ::kill(pid, number);
  }
  bool as_postgres() {
    if (geteuid() != 0) return false;
    if (!user_) user_ = getpwnam("postgres");
    return user_ != nullptr;
  }
  std::vector<std::string> as_user(std::vector<std::string> argv) {
    if (!as_postgres()) return argv;
    std::vector<std::string> out = {"setpriv", "--reuid=postgres", "--regid=postgres",
                                    "--clear-groups", "--"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
  static std::vector<const gchar *> c_args(const std::vector<std::string> &argv) {
    std::vector<const gchar *> args;
    for (const std::string &a : argv) args.push_back(a.c_str());
    args.push_back(nullptr);
    return args;
  }
  bool run_sync(const std::vector<std::string> &argv, std::string *why) {
    const std::vector<std::string> full = as_user(argv);
    gchar *err = nullptr;
    gint status = 0;
    GError *error = nullptr;
    const bool ran =
        g_spawn_sync(nullptr, const_cast<gchar **>(c_args(full).data()), nullptr,
                     static_cast<GSpawnFlags>(G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL),
                     nullptr, nullptr, nullptr, &err, &status, &error);
    const bool ok = ran && g_spawn_check_wait_status(status, nullptr);
    if (!ok) *why = argv[0] + ": " + (error ? error->message : err ? err : "failed");
    g_clear_error(&error);
    g_free(err);
    return ok;
  }
  const std::string folder_, data_;
  const int port_;
  struct passwd *user_ = nullptr;
  bool initialised_ = false;
  GSubprocess *process_ = nullptr;
  int pid_ = 0;
};

}  // namespace cudanms::testing
