// Reference encoder for troupe's tokenizer checks: transformers.js's
// tokenizer (the @lenml/tokenizers fork, installed with npm).
// usage: node reference.cjs NODE_MODULES TOKENIZER_JSON STRINGS_JSON > OUT_JSON
// STRINGS_JSON is a JSON array of strings; OUT_JSON is an array of
// {"ids": [...], "decoded": "..."} (add_special_tokens=false,
// skip_special_tokens=false).
const fs = require("fs");
const path = require("path");
const [nodeModules, tokFile, stringsFile] = process.argv.slice(2);
const { TokenizerLoader } = require(path.resolve(nodeModules, "@lenml/tokenizers"));
const tokenizerJSON = JSON.parse(fs.readFileSync(tokFile, "utf8"));
let tokenizerConfig = {};
const cfgFile = path.join(path.dirname(tokFile), "tokenizer_config.json");
if (fs.existsSync(cfgFile)) tokenizerConfig = JSON.parse(fs.readFileSync(cfgFile, "utf8"));
// Keep decode byte-faithful: no clean-up of tokenization spaces.
tokenizerConfig.clean_up_tokenization_spaces = false;
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
const strings = JSON.parse(fs.readFileSync(stringsFile, "utf8"));
const out = strings.map((s) => {
  const ids = tok.encode(s, { add_special_tokens: false });
  const decoded = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
  return { ids, decoded };
});
process.stdout.write(JSON.stringify(out));
