// A device's batch of dispatches: one command buffer recorded until the
// host needs results, each dispatch's descriptor set from pools and its
// params from chunks that are reused batch after batch (creating them per
// dispatch cost more than small kernels run on a GPU), and, with
// KILN_VULKAN_PROFILE set, a timestamp pair per dispatch.
#include "runtime/vulkan/vulkan_device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::vulkan {

namespace {

constexpr uint32_t kPoolSets = 256, kPoolDescriptors = 256 * 16;
constexpr size_t kParamsChunk = 64 * 1024;
constexpr uint32_t kProfileQueries = 2 * 4096;

bool profiling() {
  static const bool on = std::getenv("KILN_VULKAN_PROFILE") != nullptr;
  return on;
}

} // namespace

Status Device::begin() {
  KILN_RETURN_IF_ERROR(check(api_.vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer"));
  VkCommandBufferBeginInfo beginInfo{};
  beginInfo.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  beginInfo.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_RETURN_IF_ERROR(
      check(api_.vkBeginCommandBuffer(commands_, &beginInfo), "vkBeginCommandBuffer"));
  recording_ = true;
  poolsOpen_ = 0;
  setsLeft_ = descriptorsLeft_ = 0;
  chunk_ = 0;
  chunkUsed_ = 0;
  queriesUsed_ = 0;
  queryLabels_.clear();
  if (profiling() && !queries_) {
    VkQueryPoolCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    q.queryType = VK_QUERY_TYPE_TIMESTAMP;
    q.queryCount = kProfileQueries;
    KILN_RETURN_IF_ERROR(
        check(api_.vkCreateQueryPool(device_, &q, nullptr, &queries_), "vkCreateQueryPool"));
  }
  if (queries_) api_.vkCmdResetQueryPool(commands_, queries_, 0, kProfileQueries);
  return Status::success();
}

Expected<VkDescriptorSet> Device::bind(const Kernel &kernel,
                                       const std::vector<std::shared_ptr<Buffer>> &buffers,
                                       const std::vector<int64_t> &words) {
  // The params: a slice of the open chunk, or of the next one.
  const size_t bytes = std::max<size_t>(words.size() * sizeof(int64_t), 16);
  const size_t align = size_t(offsetAlignment_);
  size_t offset = (chunkUsed_ + align - 1) / align * align;
  if (chunk_ >= params_.size() || offset + bytes > params_[chunk_]->size()) {
    if (chunk_ < params_.size()) ++chunk_;
    offset = 0;
    if (chunk_ >= params_.size() || bytes > params_[chunk_]->size()) {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> c, allocate(std::max(kParamsChunk, bytes)));
      params_.insert(params_.begin() + std::ptrdiff_t(chunk_), std::move(c));
    }
  }
  Buffer &chunk = *params_[chunk_];
  std::memcpy(static_cast<char *>(chunk.data()) + offset, words.data(),
              words.size() * sizeof(int64_t));
  chunkUsed_ = offset + bytes;

  // The set: from the open pool, or the next one.
  const uint32_t descriptors = uint32_t(buffers.size() + 1);
  if (descriptors > kPoolDescriptors)
    return makeError("a kernel of ", descriptors, " bindings is more than a descriptor pool holds");
  if (poolsOpen_ == 0 || setsLeft_ == 0 || descriptorsLeft_ < descriptors) {
    if (poolsOpen_ == pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kPoolDescriptors};
      VkDescriptorPoolCreateInfo info{};
      info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      info.maxSets = kPoolSets;
      info.poolSizeCount = 1;
      info.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      KILN_RETURN_IF_ERROR(check(api_.vkCreateDescriptorPool(device_, &info, nullptr, &pool),
                                 "vkCreateDescriptorPool"));
      pools_.push_back(pool);
    }
    ++poolsOpen_;
    setsLeft_ = kPoolSets;
    descriptorsLeft_ = kPoolDescriptors;
  }
  VkDescriptorSetAllocateInfo setInfo{};
  setInfo.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  setInfo.descriptorPool = pools_[poolsOpen_ - 1];
  setInfo.descriptorSetCount = 1;
  setInfo.pSetLayouts = &kernel.setLayout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  KILN_RETURN_IF_ERROR(
      check(api_.vkAllocateDescriptorSets(device_, &setInfo, &set), "vkAllocateDescriptorSets"));
  --setsLeft_;
  descriptorsLeft_ -= descriptors;

  std::vector<VkDescriptorBufferInfo> infos;
  for (const auto &b : buffers) infos.push_back({b->buffer_, 0, VK_WHOLE_SIZE});
  infos.push_back({chunk.buffer_, offset, bytes});
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  api_.vkUpdateDescriptorSets(device_, uint32_t(writes.size()), writes.data(), 0, nullptr);
  return set;
}

Status Device::record(const Kernel &kernel, const std::vector<std::shared_ptr<Buffer>> &buffers,
                      const std::vector<int64_t> &words, int64_t invocations,
                      const std::string &label) {
  // Groups over x, and rows of them over y past the device's x limit.
  const int64_t groups =
      std::max<int64_t>(1, (invocations + kernel.workgroupSize_ - 1) / kernel.workgroupSize_);
  const int64_t x = std::min<int64_t>(groups, maxGroups_[0]);
  const int64_t y = (groups + x - 1) / x;
  if (y > int64_t(maxGroups_[1]))
    return makeError("a dispatch of ", invocations, " invocations is more than ", info_.name,
                     " launches at once");
  const uint32_t grid[3] = {uint32_t(x), uint32_t(y), 1};
  return recordGroups(kernel, buffers, words, grid, label);
}

Status Device::recordGroups(const Kernel &kernel,
                            const std::vector<std::shared_ptr<Buffer>> &buffers,
                            const std::vector<int64_t> &words, const uint32_t groups[3],
                            const std::string &label) {
  const auto t0 = std::chrono::steady_clock::now();
  struct AddTime { // on every return
    Device &d;
    std::chrono::steady_clock::time_point t0;
    ~AddTime() {
      if (!d.queries_) return;
      ++d.recordingHost_.count;
      d.recordingHost_.ns += double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
    }
  } addTime{*this, t0};
  if (int(buffers.size()) != kernel.buffers_)
    return makeError("kernel takes ", kernel.buffers_, " buffers, got ", buffers.size());
  for (const auto &b : buffers)
    if (!b || b->device_ != this) return Error{"a dispatch buffer is missing or of another device"};
  for (int a = 0; a < 3; ++a)
    if (groups[a] == 0 || groups[a] > maxGroups_[a])
      return makeError("a grid of ", groups[0], " x ", groups[1], " x ", groups[2],
                       " workgroups is past what ", info_.name, " launches");
  if (!recording_) {
    KILN_RETURN_IF_ERROR(begin());
  } else {
    // Each dispatch sees what the ones before it wrote.
    VkMemoryBarrier between{};
    between.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    api_.vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, nullptr, 0,
                              nullptr);
  }
  KILN_ASSIGN_OR_RETURN(VkDescriptorSet set, bind(kernel, buffers, words));
  held_.insert(held_.end(), buffers.begin(), buffers.end());
  api_.vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline_);
  api_.vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.layout_, 0, 1,
                               &set, 0, nullptr);
  profileBegin();
  api_.vkCmdDispatch(commands_, groups[0], groups[1], groups[2]);
  profileEnd(label);
  return Status::success();
}

Status Device::flush() {
  if (!recording_) return Status::success();
  recording_ = false;
  struct Release { // whatever happens, the batch's sets and buffers go
    Device &d;
    ~Release() {
      for (VkDescriptorPool p : d.pools_) d.api_.vkResetDescriptorPool(d.device_, p, 0);
      d.held_.clear();
    }
  } release{*this};
  // The kernels' writes made visible to the host's reads after the fence.
  VkMemoryBarrier toHost{};
  toHost.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  toHost.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  toHost.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  api_.vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &toHost, 0, nullptr, 0, nullptr);
  KILN_RETURN_IF_ERROR(check(api_.vkEndCommandBuffer(commands_), "vkEndCommandBuffer"));
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands_;
  const auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(check(api_.vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit"));
  KILN_RETURN_IF_ERROR(
      check(api_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences"));
  ++waitingHost_.count;
  waitingHost_.ns += double(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  readProfile();
  return check(api_.vkResetFences(device_, 1, &fence_), "vkResetFences");
}

Status Device::dispatch(const Kernel &kernel, const std::vector<std::shared_ptr<Buffer>> &buffers,
                        const std::vector<int64_t> &words, int64_t invocations) {
  KILN_RETURN_IF_ERROR(record(kernel, buffers, words, invocations));
  return flush();
}

void Device::profileBegin() {
  if (!queries_ || queriesUsed_ + 2 > kProfileQueries) return;
  api_.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, queriesUsed_);
}

void Device::profileEnd(const std::string &label) {
  if (!queries_ || queriesUsed_ + 2 > kProfileQueries) return;
  api_.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                           queriesUsed_ + 1);
  queriesUsed_ += 2;
  queryLabels_.push_back(label.empty() ? "(unnamed)" : label);
}

// Adds the flushed batch's timestamps to the profile; on the device's
// last call (queriesUsed_ == 0 then), prints the table.
void Device::readProfile() {
  if (!queries_) return;
  if (queriesUsed_ > 0) {
    std::vector<uint64_t> ticks(queriesUsed_);
    if (api_.vkGetQueryPoolResults(device_, queries_, 0, queriesUsed_,
                                   ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS)
      for (size_t i = 0; i < queryLabels_.size(); ++i) {
        Timing &t = profile_[queryLabels_[i]];
        ++t.count;
        t.ns += double(ticks[2 * i + 1] - ticks[2 * i]) * tickNs_;
      }
    queriesUsed_ = 0;
    queryLabels_.clear();
    return;
  }
  std::vector<std::pair<std::string, Timing>> rows(profile_.begin(), profile_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.ns > b.second.ns; });
  double total = 0;
  for (const auto &r : rows) total += r.second.ns;
  std::fprintf(stderr, "kiln vulkan profile (%s): %.3f ms on the device in all\n",
               info_.name.c_str(), total * 1e-6);
  std::fprintf(stderr,
               "  host: %lld dispatches recorded in %.3f ms (%.1f us each); %lld flushes waited "
               "%.3f ms\n",
               (long long)recordingHost_.count, recordingHost_.ns * 1e-6,
               recordingHost_.ns * 1e-3 / double(std::max<int64_t>(1, recordingHost_.count)),
               (long long)waitingHost_.count, waitingHost_.ns * 1e-6);
  for (size_t i = 0; i < rows.size() && i < 40; ++i)
    std::fprintf(stderr, "  %9.3f ms %5.1f%% %6lld x  %s\n", rows[i].second.ns * 1e-6,
                 100 * rows[i].second.ns / std::max(total, 1.0), (long long)rows[i].second.count,
                 rows[i].first.c_str());
  profile_.clear();
}

} // namespace kiln::vulkan
