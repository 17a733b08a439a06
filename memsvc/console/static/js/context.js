/** What every view is given: the API, the deployment's config, who is signed in, and navigation. */
export {};
