/* The GPUs a program is told to use, as the camera service's `gpus` key and
 * pipelines/streams --gpus take them: "all", "none" or indices "0,2,3". */
#pragma once

#include <string>
#include <vector>

/* Parses @text into @gpus (each index once, in the order given; empty for "all" and "none");
 * *@all says "all" was given. FALSE with *@why when the text is none of the three forms. Which
 * GPUs exist is the caller's to check. */
bool gst_cv_parse_gpu_list(const std::string &text, std::vector<unsigned> *gpus, bool *all,
                           std::string *why);
