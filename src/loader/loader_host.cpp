// loader_host.cpp — the host table a backend's init calls (epload/backend.h):
// register a device, set an error message, look up another backend's device.
// ctx is the InitContext of the load in progress (loader_impl.hpp).
#include <algorithm>  // find
#include <cstring>    // memcpy
#include <iterator>   // size

#include "elf.hpp"  // valid_device_name
#include "epload/backend.h"
#include "loader_impl.hpp"

namespace epload::detail {

EploadHost make_host(InitContext* ctx) {
  EploadHost h;
  h.abi_version = EPLOAD_ABI_VERSION;
  h.size = static_cast<std::uint32_t>(sizeof(EploadHost));
  h.ctx = ctx;
  h.register_device = host_register;
  h.set_error = host_set_error;
  h.lookup = host_lookup;
  return h;
}


int host_register(void* ctx, const char* name, void* device_table) {
  auto* c = static_cast<InitContext*>(ctx);
  if (c == nullptr || name == nullptr || device_table == nullptr) return EPLOAD_ERR_INVALID;
  if (std::this_thread::get_id() != c->thread) return EPLOAD_ERR_INVALID;
  const std::string_view n = name;
  if (!detail::valid_device_name(n)) {
    if (c->message.empty()) c->message = "registered an invalid device name";
    return EPLOAD_ERR_INVALID;
  }
  Loader::State& impl = *c->impl;
  {
    // Refuse early what an earlier backend owns, so the backend can react.
    std::lock_guard<std::mutex> lock(impl.registry);
    const DeviceEntry* e = impl.table->find(n);
    if (e != nullptr && e->owner != k_no_slot && e->owner != c->slot) {
      const Slot& o = impl.slots[e->owner];
      if (e->table.load(std::memory_order_relaxed) != nullptr || (o.index < c->slot && detail::pending(o))) {
        impl.slots[c->slot].outcome().conflicts.push_back(
            "device '" + std::string(n) + "' is also provided by backend '" + std::string(o.ep->name) +
            "', which comes first in index order and wins");
        if (std::find(c->refused.begin(), c->refused.end(), n) == c->refused.end()) c->refused.emplace_back(n);
        return EPLOAD_ERR_CONFLICT;
      }
    }
  }
  bool replaced = false;
  c->for_each_registered([&](detail::Registered& r) {
    if (!replaced && r.view() == n) {
      r.table = device_table;
      replaced = true;
    }
  });
  if (replaced) return EPLOAD_OK;
  detail::Registered r;
  std::memcpy(r.name, n.data(), n.size());  // valid names are at most 63 bytes
  r.name[n.size()] = '\0';
  r.size = n.size();
  r.table = device_table;
  if (c->inline_count < std::size(c->inline_registered)) {
    c->inline_registered[c->inline_count++] = r;
  } else {
    c->more_registered.push_back(r);
  }
  return EPLOAD_OK;
}

void host_set_error(void* ctx, const char* message) {
  auto* c = static_cast<InitContext*>(ctx);
  if (c == nullptr || std::this_thread::get_id() != c->thread) return;
  c->message = message ? message : "";
}

int host_lookup(void* ctx, const char* device, void** device_table) {
  auto* c = static_cast<InitContext*>(ctx);
  if (c == nullptr || device == nullptr) return EPLOAD_ERR_INVALID;
  if (std::this_thread::get_id() != c->thread) return EPLOAD_ERR_INVALID;
  Loader::State& impl = *c->impl;
  const std::string_view n = device;
  if (const DeviceEntry* e = impl.table->find(n)) {
    if (void* t = e->table.load(std::memory_order_acquire)) {
      if (device_table) *device_table = t;
      return EPLOAD_OK;
    }
  }
  auto r = impl.lookup_slow(n);
  if (!r) {
    c->last_lookup_error = r.error().message;
    if (r.error().code == Errc::interrupted) c->interrupted = true;  // so is this init's load
    return r.error().code == Errc::backend ? EPLOAD_ERR_FAILED : EPLOAD_ERR_INVALID;
  }
  if (device_table) *device_table = r.value();
  return EPLOAD_OK;
}


}  // namespace epload::detail
