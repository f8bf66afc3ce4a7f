// ESLint over the dashboard's JavaScript (tuneplane/server/static): ES modules in the
// browser, the recommended rules. Run by scripts/test as `npx eslint`.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["tuneplane/server/static/vendor/", "node_modules/", "tests/", "benchmarks/", "docs/", "examples/"] },
  {
    files: ["tuneplane/server/static/**/*.js"],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 2023, sourceType: "module", globals: globals.browser },
    // `const { dropped, ...kept } = object` is how a copy leaves fields out.
    rules: { "no-unused-vars": ["error", { ignoreRestSiblings: true }] },
  },
  {
    // The API reference's page is a classic script beside Swagger UI's bundle.
    files: ["tuneplane/server/static/api-docs.js"],
    languageOptions: { sourceType: "script" },
  },
];
