// The API reference at /docs: Swagger UI over /openapi.json, from the package's own copy.
// Started from this file rather than an inline script, so the page keeps the dashboard's
// Content-Security-Policy (script-src 'self'). A classic script, not a dashboard module.
// Swagger UI's bundle, the script before this one, defines it as a global of the window.
const swaggerUi = /** @type {any} */ (window).SwaggerUIBundle;
const script = /** @type {HTMLScriptElement} */ (document.currentScript);
// The description is beside the static files, so it is found under a --root-path prefix too.
swaggerUi({
  url: new URL("../openapi.json", script.src).pathname,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  presets: [swaggerUi.presets.apis],
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  // Swagger UI would otherwise send the description to validator.swagger.io for a badge.
  validatorUrl: null,
});
