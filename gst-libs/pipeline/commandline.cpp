#include "commandline.h"

bool gst_cv_parse_command_line(GOptionContext *context, const GOptionEntry *entries, int *argc,
                               char ***argv, std::string *error) {
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
