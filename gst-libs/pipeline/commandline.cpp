#include "commandline.h"

bool gst_cv_parse_command_line(const CommandLineHelp &help, const GOptionEntry *entries, int *argc,
                               char ***argv, std::string *error) {
  GOptionContext *context = g_option_context_new(help.parameters);
  if (help.summary) g_option_context_set_summary(context, help.summary);
  if (help.description) g_option_context_set_description(context, help.description);
  g_option_context_add_main_entries(context, entries, nullptr);
  g_option_context_add_group(context, gst_init_get_option_group());
  GError *gerror = nullptr;
  const bool parsed = g_option_context_parse(context, argc, argv, &gerror);
  g_option_context_free(context);
  if (parsed) return true;
  *error = gerror->message;
  g_error_free(gerror);
  return false;
}
