// A real MQTT broker for the tests: Debian's mosquitto on 127.0.0.1 and a free port, started,
// killed and restarted on the same port; and a subscriber (Debian's mosquitto_sub) that keeps
// every message it receives.
#pragma once

#include <arpa/inet.h>
#include <glib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cudanms::testing {

inline std::string mosquitto_binary() {
  for (const char *path : {"/usr/sbin/mosquitto", "/usr/bin/mosquitto"}) {
    if (g_file_test(path, G_FILE_TEST_IS_EXECUTABLE)) return path;
  }
  gchar *found = g_find_program_in_path("mosquitto");
  std::string path = found ? found : "";
  g_free(found);
  return path;
}

// A port nothing listens on now (the kernel's choice for an ephemeral bind).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  socklen_t length = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &length);
  close(fd);
  return ntohs(addr.sin_port);
}

inline bool port_accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

class Broker {
 public:
  explicit Broker(int port) : port_(port) {}
  ~Broker() { kill(); }

  // Starts mosquitto (with a config listening on 127.0.0.1:port, anonymous clients allowed
  // unless `config` says otherwise) and waits until it accepts.
  bool start(const std::string &config = "allow_anonymous true\n") {
    if (dir_.empty()) dir_ = make_dir();
    const std::string conf = dir_ + "/mosquitto.conf";
    // user: started as root, mosquitto would switch to its own user, who cannot read this
    // folder's password and certificate files.
    const std::string text = "listener " + std::to_string(port_) + " 127.0.0.1\n" + config +
                             "max_queued_messages 100000\nuser " + g_get_user_name() + "\n";
    if (!g_file_set_contents(conf.c_str(), text.c_str(), -1, nullptr)) return false;
    const std::string binary = mosquitto_binary();
    const std::string log = dir_ + "/mosquitto.log";
    pid_ = fork();
    if (pid_ == 0) {
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
      execl(binary.c_str(), binary.c_str(), "-c", conf.c_str(), static_cast<char *>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (port_accepts(port_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // SIGKILL: the broker vanishes mid-stream, as a crashed or unplugged one does.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // SIGSTOP and SIGCONT: a broker that hangs, and then goes on.
  void stop() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  int port() const { return port_; }
  // The broker's folder, for the files its config names.
  const std::string &dir() {
    if (dir_.empty()) dir_ = make_dir();
    return dir_;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  static std::string make_dir() {
    gchar *dir = g_dir_make_tmp("mosquitto-XXXXXX", nullptr);
    std::string path = dir;
    g_free(dir);
    return path;
  }

  int port_;
  pid_t pid_ = -1;
  std::string dir_;
};

inline std::string mosquitto_sub_binary() {
  gchar *found = g_find_program_in_path("mosquitto_sub");
  std::string path = found ? found : "";
  g_free(found);
  return path;
}

// Debian's mosquitto_sub in a process of its own, as a real consumer is, subscribed to `topic`
// with QoS 1; a thread keeps every message it prints (a JSON object a line; -d's lines about
// the protocol, which tell when the subscription holds, are told apart by their first byte).
// With `with_topics`, each message is kept as "TOPIC PAYLOAD" (-v), whatever its payload.
// pause() stops the process (SIGSTOP): the slowest subscriber there is, until resume().
class Subscriber {
 public:
  Subscriber(int port, const std::string &topic, bool with_topics = false)
      : with_topics_(with_topics) {
    const std::string binary = mosquitto_sub_binary();
    const std::string port_text = std::to_string(port);
    // stdbuf: line-buffered output through the pipe, so that lines arrive as they are printed.
    const char *argv[] = {"stdbuf",
                          "-oL",
                          binary.c_str(),
                          "-h",
                          "127.0.0.1",
                          "-p",
                          port_text.c_str(),
                          "-t",
                          topic.c_str(),
                          "-q",
                          "1",
                          "-d",
                          with_topics ? "-v" : nullptr,
                          nullptr};
    int out = -1;
    if (!g_spawn_async_with_pipes(
            nullptr, const_cast<gchar **>(argv), nullptr,
            static_cast<GSpawnFlags>(G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH), nullptr,
            nullptr, &pid_, nullptr, &out, nullptr, nullptr)) {
      return;
    }
    reader_ = std::thread([this, out] { read_lines(out); });
    // -d prints the broker's SUBACK once the subscription holds.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline && !subscribed()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~Subscriber() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      g_spawn_close_pid(pid_);
    }
    if (reader_.joinable()) reader_.join();
  }
  bool connected() const { return subscribed(); }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  std::vector<std::string> messages() const {
    std::lock_guard<std::mutex> guard(lock_);
    return messages_;
  }
  // Waits until `count` messages arrived, or `timeout` passed.
  bool wait_for(size_t count, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (messages().size() >= count) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return messages().size() >= count;
  }

 private:
  bool subscribed() const {
    std::lock_guard<std::mutex> guard(lock_);
    for (const std::string &line : debug_) {
      if (line.find("SUBACK") != std::string::npos) return true;
    }
    return false;
  }
  void read_lines(int fd) {
    FILE *in = fdopen(fd, "r");
    char *line = nullptr;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, in)) > 0) {
      if (line[length - 1] == '\n') line[--length] = 0;
      std::lock_guard<std::mutex> guard(lock_);
      const bool message =
          with_topics_ ? strncmp(line, "Client ", 7) != 0 && strncmp(line, "Subscribed ", 11) != 0
                       : line[0] == '{';
      (message ? messages_ : debug_).emplace_back(line, static_cast<size_t>(length));
    }
    free(line);
    fclose(in);
  }

  bool with_topics_;
  GPid pid_ = -1;
  std::thread reader_;
  mutable std::mutex lock_;
  std::vector<std::string> messages_, debug_;
};

}  // namespace cudanms::testing
