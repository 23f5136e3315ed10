#include "launcher/job/elastic_workers.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/job/elastic_admission.hpp"
#include "launcher/ranks/rank_env.hpp"
#include "launcher/ranks/user_env.hpp"

namespace hvrun {

ElasticWorkers::ElasticWorkers(const std::vector<JobHost>& hosts, AgentLinks& links, OutputMux& output,
                               const ElasticAdmission& admission, Launch launch)
    : hosts_(hosts), links_(links), output_(output), admission_(admission), launch_(std::move(launch)) {}

std::string ElasticWorkers::bound_text() {
  return "the job started " + std::to_string(kMaxWorkers) + " workers in its life, hvrun's bound";
}

std::optional<std::vector<int>> ElasticWorkers::start(const std::vector<SlotInfo>& assignment) {
  std::map<std::size_t, std::vector<SlotInfo>> by_host;
  std::vector<int> started_ranks;
  for (const SlotInfo& s : assignment)
    if (!running_.contains({s.host, s.local_rank})) by_host[admission_.index_of(s.host)].push_back(s);
  if (by_host.empty()) return started_ranks;
  JobNetwork net;
  net.hosts.resize(hosts_.size());
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    if (const auto& nic = admission_.nic_of(i)) net.hosts[i] = HostNetwork{hosts_[i].name, nic->iface, nic->address};
  const std::size_t coordinator = admission_.index_of(assignment.front().host);
  net.master_addr = admission_.nic_of(coordinator)->address;
  net.master_port = hosts_[coordinator].master_port;
  net.restarts.run_id = job_run_id(launch_.options);
  net.role = launch_.options.role;
  std::vector<std::string> node_order = assignment_hosts(assignment);
  for (auto& [i, slots] : by_host) {
    net.horovod_rendezvous_addr = admission_.rendezvous_addr(i);
    net.horovod_rendezvous_port = admission_.rendezvous_port(i);
    const EnvPolicy& env = launch_.env();
    LaunchMsg m{launch_.cwd(), launch_.options.command, hosts_[i].is_local ? env.local() : env.remote(), {}};
    for (const SlotInfo& s : slots) {
      if (workers_.size() >= static_cast<std::size_t>(kMaxWorkers)) return std::nullopt;
      const int id = static_cast<int>(workers_.size());
      output_.open_files(id);
      const int node = static_cast<int>(std::find(node_order.begin(), node_order.end(), s.host) - node_order.begin());
      auto rank_env = rank_environment(
          RankInfo{s.rank, s.size, s.local_rank, s.local_size, s.cross_rank, s.cross_size, static_cast<int>(i), node,
                   static_cast<int>(node_order.size())},
          net);
      rank_env["HOROVOD_ELASTIC"] = "1";
      apply_user_variables(rank_env, env.user());
      m.ranks.push_back(RankLaunch{id, std::move(rank_env)});
      workers_.push_back(Worker{i, s.local_rank, true});
      running_[{s.host, s.local_rank}] = id;
      started_ranks.push_back(s.rank);
      log_of(LogSubsys::kRank).info("worker {} is {} (rank {} of {})", id, slot_text({s.host, s.local_rank}), s.rank, s.size);
    }
    links_.send(i, m);
  }
  return started_ranks;
}

void ElasticWorkers::check_rank_of(std::size_t i, int id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= workers_.size() || workers_[static_cast<std::size_t>(id)].host != i)
    throw ProtocolError(links_.peer(i) + ": message about worker " + std::to_string(id) + ", which is not on that host");
}

SlotKey ElasticWorkers::exited(std::size_t i, int id) {
  Worker& w = workers_[static_cast<std::size_t>(id)];
  if (!w.running) throw ProtocolError(links_.peer(i) + ": worker " + std::to_string(id) + " exited twice");
  w.running = false;
  output_.flush(id);
  const SlotKey key{hosts_[i].name, w.local_rank};
  if (running_[key] == id) running_.erase(key);
  return key;
}

std::vector<SlotKey> ElasticWorkers::host_lost(std::size_t i) {
  std::vector<SlotKey> gone;
  for (std::size_t id = 0; id < workers_.size(); ++id)
    if (workers_[id].host == i && workers_[id].running) {
      workers_[id].running = false;
      output_.flush(static_cast<int>(id));
      gone.push_back({hosts_[i].name, workers_[id].local_rank});
    }
  for (const auto& k : gone) running_.erase(k);
  return gone;
}

std::vector<int> ElasticWorkers::on(std::size_t i) const {
  std::vector<int> ids;
  for (std::size_t id = 0; id < workers_.size(); ++id)
    if (workers_[id].host == i && workers_[id].running) ids.push_back(static_cast<int>(id));
  return ids;
}

bool ElasticWorkers::none_running() const {
  return std::none_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
}

std::optional<int> ElasticWorkers::running_at(const SlotKey& slot) const {
  const auto it = running_.find(slot);
  if (it == running_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hvrun
