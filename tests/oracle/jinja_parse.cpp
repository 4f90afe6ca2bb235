// llama.cpp's own Jinja parser (common/jinja, what llama-server --jinja renders chat
// templates with) as a program: for each file named, one line, "ok" or "error: ...".
// Built by tests/it against the sources of the llama.cpp scripts/build-llama.sh fetched.
#include "jinja/lexer.h"
#include "jinja/parser.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char ** argv) {
    for (int i = 1; i < argc; i++) {
        std::ifstream f(argv[i], std::ios::binary);
        std::stringstream s;
        s << f.rdbuf();
        std::string line = "ok";
        try {
            jinja::lexer lexer;
            auto tokens = lexer.tokenize(s.str());
            jinja::parse_from_tokens(tokens);
        } catch (const std::exception & e) {
            line = std::string("error: ") + e.what();
            for (auto & c : line) {
                if (c == '\n') c = ' ';
            }
        }
        std::printf("%s\n", line.c_str());
    }
    return 0;
}
