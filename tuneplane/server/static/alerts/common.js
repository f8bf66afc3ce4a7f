// The API paths the alert-rules page's parts share (their forms' parts are lib/forms.js).

import * as api from "../lib/api.js";

export const rulesPath = (project) => `${api.projectPath(project)}/alert-rules`;
export const webhooksPath = (project) => `${api.projectPath(project)}/webhooks`;
