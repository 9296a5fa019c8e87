#include "codegen/vulkan/spirv.h"

#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>
#include <spirv-tools/libspirv.h>

#include <memory>
#include <mutex>

namespace kiln::codegen {

namespace {

void initializeGlslang() {
  static std::once_flag once;
  std::call_once(once, [] { glslang_initialize_process(); });
}

struct ShaderDeleter {
  void operator()(glslang_shader_t *s) const { glslang_shader_delete(s); }
};
struct ProgramDeleter {
  void operator()(glslang_program_t *p) const { glslang_program_delete(p); }
};

} // namespace

Expected<std::vector<uint32_t>> compileGlslCompute(const std::string &glsl) {
  initializeGlslang();
  glslang_input_t input{};
  input.language = GLSLANG_SOURCE_GLSL;
  input.stage = GLSLANG_STAGE_COMPUTE;
  input.client = GLSLANG_CLIENT_VULKAN;
  input.client_version = GLSLANG_TARGET_VULKAN_1_2;
  input.target_language = GLSLANG_TARGET_SPV;
  input.target_language_version = GLSLANG_TARGET_SPV_1_5;
  input.code = glsl.c_str();
  input.default_version = 450;
  input.default_profile = GLSLANG_NO_PROFILE;
  input.messages =
      static_cast<glslang_messages_t>(GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT);
  input.resource = glslang_default_resource();

  std::unique_ptr<glslang_shader_t, ShaderDeleter> shader(glslang_shader_create(&input));
  if (!shader) return Error{"glslang could not create a shader"};
  if (!glslang_shader_preprocess(shader.get(), &input) ||
      !glslang_shader_parse(shader.get(), &input))
    return makeError("glslang rejected the shader: ", glslang_shader_get_info_log(shader.get()));
  std::unique_ptr<glslang_program_t, ProgramDeleter> program(glslang_program_create());
  glslang_program_add_shader(program.get(), shader.get());
  if (!glslang_program_link(program.get(),
                            GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT))
    return makeError("glslang could not link the shader: ",
                     glslang_program_get_info_log(program.get()));
  glslang_program_SPIRV_generate(program.get(), GLSLANG_STAGE_COMPUTE);
  if (const char *messages = glslang_program_SPIRV_get_messages(program.get());
      messages && *messages)
    return makeError("glslang's SPIR-V generation reported: ", messages);
  std::vector<uint32_t> words(glslang_program_SPIRV_get_size(program.get()));
  glslang_program_SPIRV_get(program.get(), words.data());
  return words;
}

Status validateSpirv(const std::vector<uint32_t> &words) {
  spv_context context = spvContextCreate(SPV_ENV_VULKAN_1_2);
  spv_diagnostic diagnostic = nullptr;
  spv_const_binary_t binary{words.data(), words.size()};
  const spv_result_t result = spvValidate(context, &binary, &diagnostic);
  std::string message = diagnostic && diagnostic->error ? diagnostic->error : "";
  spvDiagnosticDestroy(diagnostic);
  spvContextDestroy(context);
  if (result != SPV_SUCCESS) return makeError("invalid SPIR-V: ", message);
  return Status::success();
}

} // namespace kiln::codegen
